import { SingleBar, Presets } from 'cli-progress';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PubSubCore } from '../core/pubsub-core.js';
import { SqliteStore } from '../store/sqlite-store.js';

const FIXTURE = fileURLToPath(new URL('../../fixtures/demo/orders.jsonl', import.meta.url));

/**
 * The core on its own: publish the demo's order changes keyed by order id, consume them from an
 * ordered subscription while nacking a few, and show that every order's changes arrived in order.
 */
export async function runCoreDemo(opts: { dataDir?: string }): Promise<void> {
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), 'orderly-demo-'));
  const core = await PubSubCore.open({ store: SqliteStore.open(dataDir), projectId: 'demo' });
  try {
    if (!core.hasTopic('order-changes')) await core.createTopic('order-changes');
    if (!core.hasSubscription('orders-ordered')) {
      await core.createSubscription('orders-ordered', { topic: 'order-changes', enableMessageOrdering: true });
    }
    const events = readFileSync(FIXTURE, 'utf8').trim().split('\n');
    const bar = new SingleBar({ format: '{task} [{bar}] {value}/{total}', hideCursor: true }, Presets.shades_classic);
    bar.start(events.length, 0, { task: 'publish' });
    for (let i = 0; i < events.length; i += 500) {
      const chunk = events.slice(i, i + 500);
      await core.publish('order-changes', chunk.map((line) => ({ data: line, orderingKey: JSON.parse(line).order_id })));
      bar.update(i + chunk.length);
    }
    bar.stop();

    const lastSeen = new Map<string, number>();
    let outOfOrder = 0;
    const nackedIds = new Set<string>();
    const consume = new SingleBar({ format: '{task} [{bar}] {value}/{total}', hideCursor: true }, Presets.shades_classic);
    consume.start(events.length, 0, { task: 'consume' });
    let done = 0;
    await new Promise<void>((resolve) => {
      const sub = core.subscribe('orders-ordered', (m) => {
        const seq = Number.parseInt(JSON.parse(m.message.data.toString())._CHANGE_SEQUENCE_NUMBER, 16);
        const prev = lastSeen.get(m.message.orderingKey) ?? 0;
        if (seq !== prev + 1) outOfOrder++;
        lastSeen.set(m.message.orderingKey, seq);
        // Nack one change in fifty: it and every later change of that order come again, in order.
        if (Number(m.message.messageId) % 50 === 7 && !nackedIds.has(m.message.messageId)) {
          nackedIds.add(m.message.messageId);
          lastSeen.set(m.message.orderingKey, seq - 1);
          return m.nack();
        }
        consume.update(++done);
        if (done === events.length) void sub.close().then(resolve);
      });
    });
    consume.stop();
    const metrics = core.metrics('orders-ordered');
    console.log(`\nPublished ${events.length} order changes over ${lastSeen.size} ordering keys (order ids).`);
    console.log(`Nacked ${nackedIds.size} changes; ${metrics.counters.redelivered} deliveries were redeliveries of a nacked change or a later one of its order.`);
    console.log(`Per-order gaps or reversals seen by the handler: ${outOfOrder}. Backlog left: ${metrics.backlogMessages}.`);
    console.log(`Store: ${join(dataDir, 'orderly.sqlite')}`);
  } finally {
    await core.close();
    if (!opts.dataDir) rmSync(dataDir, { recursive: true, force: true });
  }
}
