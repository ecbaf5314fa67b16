/**
 * The endpoint against its peer, same workload, same run: BENCH_ENDPOINT_MESSAGES (default 200,000) 1 KB
 * messages, published in batches of 1,000 messages of one ordering key each (keys rotating), 8 batches in
 * flight; then consumed with 1,000 messages outstanding and every message acked.
 * - Orderly: a real `orderly serve` process, driven by a lean gRPC client (bench/grpc-client.ts): one Publish
 *   RPC per batch; one StreamingPull stream with the acks sent on the stream; an ordered subscription.
 * - NATS JetStream (Debian's nats-server, file storage): a batch is 1,000 awaited async JetStream publishes to
 *   the key's subject; a durable pull consumer with explicit acks (max_ack_pending 1,000), consumed.
 * Consume ends when the server has every ack (Orderly: its acked counter; JetStream: no ack pending).
 * Each side runs a warm-up round on its own topic/stream first; the second round is measured.
 */
import { AckPolicy, connect, StorageType, type NatsConnection } from 'nats';
import { fmt, time, type BenchOutput, type Check } from './report.js';
import { LeanPubsubClient } from './grpc-client.js';
import { ensureNatsServer, startNatsServer, type NatsBinary } from './nats-server.js';
import { startOrderlyServe, type ServeProcess } from './serve-process.js';

const MESSAGES = Number(process.env.BENCH_ENDPOINT_MESSAGES ?? 200_000);
const BATCH = 1000;
const IN_FLIGHT = 8;
const OUTSTANDING = 1000;
const KEYS = 10_000;
const DATA = Buffer.alloc(1024, 'x');
const MIN_RATIO = 2.0;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Rates {
  publish: number;
  consume: number;
}

/** Runs `batch(b)` for every batch, at most IN_FLIGHT at a time. */
async function batches(run: (b: number) => Promise<unknown>): Promise<void> {
  const count = Math.ceil(MESSAGES / BATCH);
  let next = 0;
  const lane = async () => {
    while (next < count) await run(next++);
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, lane));
}

const batchSize = (b: number) => Math.min(BATCH, MESSAGES - b * BATCH);

async function orderlyRound(server: ServeProcess, client: LeanPubsubClient, name: string): Promise<Rates> {
  await client.createTopic(name);
  await client.createSubscription(name, name, true);
  const publish = await time(() =>
    batches((b) =>
      client.publish(
        name,
        Array.from({ length: batchSize(b) }, () => ({ data: DATA, orderingKey: `key-${b % KEYS}` })),
      ),
    ),
  );
  const consume = await time(async () => {
    await client.drain(name, MESSAGES, { maxOutstandingMessages: OUTSTANDING });
    while ((await server.counters(name)).acked < MESSAGES) await sleep(10);
  });
  return { publish: MESSAGES / publish, consume: MESSAGES / consume };
}

async function benchOrderly(): Promise<Rates> {
  const server = await startOrderlyServe();
  const client = new LeanPubsubClient(server.host, server.projectId);
  try {
    await orderlyRound(server, client, 'warm');
    return await orderlyRound(server, client, 'bench');
  } finally {
    client.close();
    await server.stop();
  }
}

async function jetStreamRound(nc: NatsConnection, name: string): Promise<Rates> {
  const jsm = await nc.jetstreamManager();
  const js = nc.jetstream();
  await jsm.streams.add({ name, subjects: [`${name}.>`], storage: StorageType.File });
  const publish = await time(() =>
    batches((b) => Promise.all(Array.from({ length: batchSize(b) }, () => js.publish(`${name}.key-${b % KEYS}`, DATA)))),
  );
  await jsm.consumers.add(name, { durable_name: name, ack_policy: AckPolicy.Explicit, max_ack_pending: OUTSTANDING });
  const consumer = await js.consumers.get(name, name);
  const consume = await time(async () => {
    const messages = await consumer.consume({ max_messages: OUTSTANDING });
    let received = 0;
    for await (const m of messages) {
      m.ack();
      if (++received === MESSAGES) break;
    }
    for (;;) {
      const info = await jsm.consumers.info(name, name);
      if (info.num_ack_pending === 0 && info.num_pending === 0) break;
      await sleep(10);
    }
  });
  return { publish: MESSAGES / publish, consume: MESSAGES / consume };
}

async function benchJetStream(binary: NatsBinary): Promise<Rates> {
  const server = await startNatsServer(binary);
  const nc = await connect({ servers: server.url });
  try {
    await jetStreamRound(nc, 'warm');
    return await jetStreamRound(nc, 'bench');
  } finally {
    await nc.close();
    await server.stop();
  }
}

export async function benchEndpoint(): Promise<BenchOutput> {
  // Installed (if need be) before anything is measured, so apt-get does not compete with a measurement.
  const nats = ensureNatsServer();
  const orderly = await benchOrderly();
  const jetStream = 'unavailable' in nats ? undefined : await benchJetStream(nats);
  const rows = [
    ['`orderly serve` (lean gRPC client)', fmt.int(orderly.publish), fmt.int(orderly.consume), '', ''],
    jetStream
      ? [
          `NATS JetStream (${'version' in nats ? nats.version : ''}, file storage)`,
          fmt.int(jetStream.publish),
          fmt.int(jetStream.consume),
          '',
          '',
        ]
      : ['NATS JetStream', 'skipped', 'skipped', '', ''],
  ];
  const checks: Check[] = [];
  for (const phase of ['publish', 'consume'] as const) {
    const ratio = jetStream ? orderly[phase] / jetStream[phase] : undefined;
    checks.push({
      target: `${phase}: Orderly / JetStream ≥ ${MIN_RATIO.toFixed(1)}`,
      measured: ratio === undefined ? 'not measured (no nats-server)' : fmt.ratio(ratio),
      pass: ratio === undefined ? undefined : ratio >= MIN_RATIO,
    });
    rows[0]![phase === 'publish' ? 3 : 4] = ratio === undefined ? '' : fmt.ratio(ratio);
  }
  if ('unavailable' in nats) console.error(`endpoint: JetStream comparison skipped: ${nats.unavailable}`);
  return {
    tables: [
      {
        title: `${fmt.int(MESSAGES)} × 1 KB messages, batches of ${BATCH} (one key each), ${IN_FLIGHT} in flight; ${OUTSTANDING} outstanding while consuming`,
        header: ['endpoint', 'publish msgs/s', 'consume msgs/s', 'publish ratio vs JetStream', 'consume ratio vs JetStream'],
        numeric: [1, 2, 3, 4],
        rows,
      },
    ],
    checks,
  };
}
