/**
 * Google's Node client against `orderly serve` (a separate process): publish with ordering keys, then
 * streaming pull with ordering and ack; 1 KB messages over 1,000 keys. Baseline: the same workload
 * through the in-process library API (publish -> subscribe callback -> ack) in the same run.
 */
import { PubSub, type Message } from '@google-cloud/pubsub';
import { PubSubCore } from '../src/core/pubsub-core.js';
import { SqliteStore } from '../src/store/sqlite-store.js';
import { tempDir } from '../test/helpers/temp-dir.js';
import { ratioTable, time, type BenchOutput } from './report.js';
import { startOrderlyServe } from './serve-process.js';
import { ackAll } from './workload.js';

const MESSAGES = Math.min(Number(process.env.BENCH_MESSAGES ?? 50_000), 20_000);
const KEYS = 1_000;
const DATA = Buffer.alloc(1024, 'x');

async function inProcess(): Promise<number> {
  const dir = tempDir('orderly-bench-');
  const core = await PubSubCore.open({ store: SqliteStore.open(dir.path), tickMs: 50 });
  try {
    await core.createTopic('bench');
    await core.createSubscription('bench-sub', { topic: 'bench', enableMessageOrdering: true });
    const { finished, subscriber } = ackAll(core, 'bench-sub', MESSAGES);
    const seconds = await time(async () => {
      for (let i = 0; i < MESSAGES; i += 100) {
        await Promise.all(
          Array.from({ length: 100 }, (_, j) => core.publish('bench', [{ data: DATA, orderingKey: `key-${(i + j) % KEYS}` }])),
        );
      }
      await finished;
    });
    await subscriber.close();
    return MESSAGES / seconds;
  } finally {
    await core.close();
    dir.remove();
  }
}

async function throughClient(): Promise<number> {
  const server = await startOrderlyServe();
  try {
    process.env.METADATA_SERVER_DETECTION = 'none';
    const pubsub = new PubSub({ projectId: server.projectId, apiEndpoint: server.host, emulatorMode: true });
    const [topic] = await pubsub.createTopic('bench');
    const [subscription] = await topic.createSubscription('bench-sub', { enableMessageOrdering: true });
    topic.setPublishOptions({ messageOrdering: true, batching: { maxMessages: 100, maxMilliseconds: 5 } });
    let acked = 0;
    let done!: () => void;
    const finished = new Promise<void>((r) => (done = r));
    subscription.on('message', (m: Message) => {
      m.ack();
      if (++acked === MESSAGES) done();
    });
    const seconds = await time(async () => {
      for (let i = 0; i < MESSAGES; i += 1000) {
        await Promise.all(
          Array.from({ length: Math.min(1000, MESSAGES - i) }, (_, j) =>
            topic.publishMessage({ data: DATA, orderingKey: `key-${(i + j) % KEYS}` }),
          ),
        );
      }
      await finished;
    });
    await subscription.close();
    await pubsub.close();
    return MESSAGES / seconds;
  } finally {
    await server.stop();
  }
}

export async function benchClient(): Promise<BenchOutput> {
  const baseline = await inProcess();
  const client = await throughClient();
  return ratioTable([
    { name: 'in-process publish -> callback -> ack (baseline)', perSecond: baseline, baseline },
    {
      name: '@google-cloud/pubsub publish + StreamingPull (ordering) via orderly serve',
      perSecond: client,
      baseline,
      extra: `${MESSAGES} messages, ${KEYS} keys`,
    },
  ]);
}
