import Database from 'better-sqlite3';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { MemoryOptions } from '../../src/core/memory-budget.js';
import { PubSubCore } from '../../src/core/pubsub-core.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait-for.js';

let dir: ReturnType<typeof tempDir>;
const open = (memory?: MemoryOptions) =>
  PubSubCore.open({ store: SqliteStore.open(dir.path, { durability: 'process' }), projectId: 'p', memory });

beforeEach(() => {
  dir = tempDir();
});
afterEach(() => dir.remove());

async function publishBacklog(core: PubSubCore, messages: number, keys: number, bytes = 100): Promise<void> {
  for (let i = 0; i < messages; i += 1000) {
    await core.publish(
      'events',
      Array.from({ length: Math.min(1000, messages - i) }, (_, j) => ({
        data: `${i + j}:`.padEnd(bytes, 'x'),
        orderingKey: `k${(i + j) % keys}`,
      })),
    );
  }
}

describe('memory is bounded by configuration, not by the backlog', () => {
  it('a callback drain commits acks while handlers still run (delivery yields to the event loop)', async () => {
    const core = await open();
    await core.createTopic('events');
    await core.createSubscription('sub', { topic: 'events', enableMessageOrdering: true });
    await publishBacklog(core, 20_000, 100);
    const reader = new Database(join(dir.path, 'orderly.sqlite'), { readonly: true });
    const durableAcks = () => reader.prepare('SELECT count(*) FROM acks').pluck().get() as number;
    let handled = 0;
    let durableWhileRunning = 0;
    // Handlers that settle synchronously: the case that used to keep delivery on microtasks until the end.
    const subscriber = core.subscribe('sub', () => {
      handled++;
      if (handled === 15_000) durableWhileRunning = durableAcks();
    });
    await waitFor('the drain', () => handled >= 20_000, 30_000);
    await subscriber.close();
    reader.close();
    expect(durableWhileRunning).toBeGreaterThan(0);
    await core.close();
  });

  it('a backlog larger than the window and the payload budget is delivered completely, per key in order, also after a restart', async () => {
    const memory = { messagesPerSubscription: 500, messagesPerKey: 50, payloadBytes: 16 * 1024 };
    let core = await open(memory);
    await core.createTopic('events');
    await core.createSubscription('sub', { topic: 'events', enableMessageOrdering: true });
    await publishBacklog(core, 10_000, 20, 200);
    await core.close();
    core = await open(memory);
    expect(core.metrics('sub').backlogMessages).toBe(10_000);
    const seen = new Map<string, number[]>();
    let maxHeld = 0;
    const subscriber = core.subscribe('sub', async (m) => {
      const n = Number(m.message.data.toString().split(':')[0]);
      seen.set(m.message.orderingKey, [...(seen.get(m.message.orderingKey) ?? []), n]);
      const metrics = core.metrics('sub');
      maxHeld = Math.max(maxHeld, metrics.heldMessages);
      expect(core.memoryUse().payloadBytes).toBeLessThanOrEqual(memory.payloadBytes);
    });
    await waitFor('the drain', () => core.metrics('sub').backlogMessages === 0, 30_000);
    await subscriber.close();
    expect(maxHeld).toBeLessThanOrEqual(memory.messagesPerSubscription);
    for (const [key, ns] of seen) {
      const k = Number(key.slice(1));
      expect(ns, key).toEqual(Array.from({ length: 500 }, (_, i) => k + i * 20));
    }
    expect(seen.size).toBe(20);
    await core.close();
  });

  it('the store file shrinks after a drained backlog is compacted', async () => {
    const core = await open();
    await core.createTopic('events');
    await core.createSubscription('sub', { topic: 'events' });
    await publishBacklog(core, 20_000, 1000, 1000);
    await core.flushed();
    const file = join(dir.path, 'orderly.sqlite');
    await waitFor('the checkpoint', () => statSync(file).size > 20_000 * 1000, 30_000);
    const full = statSync(file).size;
    const subscriber = core.subscribe('sub', () => undefined);
    await waitFor('the drain', () => core.metrics('sub').backlogMessages === 0, 30_000);
    await subscriber.close();
    await core.flushed();
    const { deletedMessages } = await core.compact();
    expect(deletedMessages).toBe(20_000);
    await waitFor('the file to shrink', () => statSync(file).size < full / 4, 30_000);
    await core.close();
  });
});
