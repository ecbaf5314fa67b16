/**
 * Child process for the crash test. Publishes keyed messages and consumes them through the callback
 * subscriber, printing a line only after each step is durable:
 *   P <messageId> <key> <sequence>   publish confirmed
 *   D <messageId> <key> <sequence>   delivered to the handler
 *   A <messageId> <key> <sequence>   ack confirmed
 * With mode "drain" it publishes nothing and exits once the backlog is empty.
 */
import { PubSubCore } from '../../src/core/pubsub-core.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';

const [dir, mode] = process.argv.slice(2) as [string, 'run' | 'drain'];
const core = await PubSubCore.open({ store: SqliteStore.open(dir), tickMs: 20 });
if (!core.hasTopic('crash-topic')) await core.createTopic('crash-topic');
if (!core.hasSubscription('crash-sub')) {
  await core.createSubscription('crash-sub', { topic: 'crash-topic', enableMessageOrdering: true, ackDeadlineSeconds: 10 });
}
const out = (tag: string, id: string, key: string, seq: number) => process.stdout.write(`${tag} ${id} ${key} ${seq}\n`);

core.subscribe(
  'crash-sub',
  async (m) => {
    out('D', m.message.messageId, m.message.orderingKey, m.message.sequence);
    if (Math.random() < 0.05) return m.nack();
    await core.acknowledge('crash-sub', [m.ackId]);
    out('A', m.message.messageId, m.message.orderingKey, m.message.sequence);
  },
  { flowControl: { maxMessages: 200 } },
);

if (mode === 'drain') {
  const timer = setInterval(() => {
    if (core.metrics('crash-sub').backlogMessages === 0) {
      clearInterval(timer);
      process.stdout.write('DONE\n');
      void core.close().then(() => process.exit(0));
    }
  }, 50);
} else {
  let n = 0;
  for (;;) {
    const batch = Array.from({ length: 1 + Math.floor(Math.random() * 20) }, () => ({
      data: `payload-${n++}`,
      orderingKey: `key-${Math.floor(Math.random() * 30)}`,
    }));
    await Promise.all(
      batch.map(async (m) => {
        const [id] = await core.publish('crash-topic', [m]);
        out('P', id!, m.orderingKey, 0);
      }),
    );
  }
}
