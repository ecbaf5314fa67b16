import { describe, expect, it } from 'vitest';
import { PubSubCore } from '../../src/core/pubsub-core.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { tempDirPerTest } from '../helpers/temp-dir-per-test.js';
import { waitFor } from '../helpers/wait-for.js';

const dir = tempDirPerTest();

describe('core.subscribe acks', () => {
  it('sends the acks of handlers that finish together to the store as one write, and every ack is durable once close resolves', async () => {
    const store = SqliteStore.open(dir.path, { durability: 'process' });
    // The real store, counting the ack writes it is asked for.
    const ack = store.ack.bind(store);
    let ackWrites = 0;
    let ackedSeqs = 0;
    store.ack = (subscription, seqs) => {
      ackWrites++;
      ackedSeqs += seqs.length;
      return ack(subscription, seqs);
    };
    const core = await PubSubCore.open({ store, projectId: 'p' });
    await core.createTopic('events');
    await core.createSubscription('sub', { topic: 'events', enableMessageOrdering: true });
    const count = 3000;
    for (let i = 0; i < count; i += 1000) {
      await core.publish(
        'events',
        Array.from({ length: 1000 }, (_, j) => ({ data: `m${i + j}`, orderingKey: `k${(i + j) % 300}` })),
      );
    }
    const seen = new Map<string, number[]>();
    let handled = 0;
    const subscriber = core.subscribe('sub', ({ message }) => {
      handled++;
      const n = Number(message.data.toString().slice(1));
      seen.set(message.orderingKey, [...(seen.get(message.orderingKey) ?? []), n]);
    });
    await waitFor('every message handled', () => handled >= count, 30_000);
    // Closed right after the last handler: its ack (not yet sent) must still be written.
    await subscriber.close();
    expect(handled).toBe(count);
    expect(ackedSeqs).toBe(count);
    // Batches of up to 1000 deliveries (the default flow control), each acked in one write, not one per message.
    expect(ackWrites).toBeLessThan(count / 10);
    for (const [key, ns] of seen) expect(ns, key).toEqual([...ns].sort((a, b) => a - b));
    await core.close();

    // Reopened: nothing is delivered again, every ack reached the store.
    const again = await PubSubCore.open({ store: SqliteStore.open(dir.path, { durability: 'process' }), projectId: 'p' });
    expect(await again.pull('sub', { maxMessages: 100 })).toEqual([]);
    expect(again.metrics('sub', 0).backlogMessages).toBe(0);
    await again.close();
  });
});
