import Database from 'better-sqlite3';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { compactionPlan } from '../../src/core/compaction-plan.js';
import type { PubSubCore } from '../../src/core/pubsub-core.js';
import { STORE_FILE } from '../../src/store/sqlite-store.js';
import { openCore, pullAndAck } from '../helpers/core.js';
import { tempDir } from '../helpers/temp-dir.js';

/**
 * Compaction and each subscription's own messageRetentionDuration: a message past a subscription's
 * retention is no longer held for it, whatever the topic's other subscriptions keep.
 */
let dir: ReturnType<typeof tempDir>;
let clock: ManualClock;
let core: PubSubCore;

beforeEach(async () => {
  dir = tempDir();
  clock = new ManualClock();
  // Compaction runs only when the test calls it, so its count is the test's.
  ({ core } = await openCore(dir.path, clock, { compactEveryMs: 30 * 86_400_000 }));
  await core.createTopic('events');
});
afterEach(async () => {
  await core.close();
  dir.remove();
});

describe('compaction with per-subscription retention', () => {
  it('a subscription nobody reads stops holding messages once they are past its own messageRetentionDuration', async () => {
    // 'read' (the default retention, 7 days) acks everything; 'unread' (10 minutes) is never read.
    await core.createSubscription('read', { topic: 'events', enableMessageOrdering: true });
    await core.createSubscription('unread', { topic: 'events', enableMessageOrdering: true, messageRetentionDuration: '10m' });
    await core.publish('events', [
      { data: 'old-1', orderingKey: 'k' },
      { data: 'old-2', orderingKey: 'k' },
    ]);
    clock.advance(9 * 60_000);
    await core.publish('events', [{ data: 'young', orderingKey: 'k' }]);
    expect(await pullAndAck(core, 'read')).toEqual(['old-1', 'old-2', 'young']);
    expect((await core.compact()).deletedMessages).toBe(0);
    clock.advance(61_000);
    // Acked by 'read', expired for 'unread': nobody can be given them again (they held the store for 7 days).
    expect((await core.compact()).deletedMessages).toBe(2);
    expect(await pullAndAck(core, 'unread')).toEqual(['young']);
  });

  it('a subscription retaining acked messages, and the topic retention, still keep theirs', async () => {
    await core.updateTopic('events', { messageRetentionDuration: '20m' });
    await core.createSubscription('retains', { topic: 'events', retainAckedMessages: true, messageRetentionDuration: '15m' });
    await core.createSubscription('unread', { topic: 'events', messageRetentionDuration: '10m' });
    await core.publish('events', [{ data: 'a' }]);
    expect(await pullAndAck(core, 'retains')).toEqual(['a']);
    clock.advance(11 * 60_000);
    expect((await core.compact()).deletedMessages).toBe(0);
    clock.advance(5 * 60_000);
    // Past 'retains''s 15 minutes, within the topic's 20.
    expect((await core.compact()).deletedMessages).toBe(0);
    clock.advance(5 * 60_000);
    expect((await core.compact()).deletedMessages).toBe(1);
  });

  it("a deleted topic's per-key sequences go with its messages: nothing publishes to its uid again", async () => {
    await core.createTopic('kept');
    for (const topic of ['events', 'kept']) {
      await core.createSubscription(`${topic}-sub`, { topic, enableMessageOrdering: true });
      await core.publish(topic, [{ data: 'a', orderingKey: 'k1' }]);
      await core.publish(topic, [{ data: 'b', orderingKey: 'k2' }]);
      expect(await pullAndAck(core, `${topic}-sub`)).toEqual(['a', 'b']);
    }
    // Compaction keeps each deleted message's key sequence (one row per key) for the next publish on the key.
    expect((await core.compact()).deletedMessages).toBe(4);
    await core.deleteTopic('events');
    await core.deleteSubscription('events-sub');
    await core.compact();
    await core.close();
    const db = new Database(join(dir.path, STORE_FILE), { readonly: true });
    const rows = db
      .prepare('SELECT t.name, k.ordering_key, k.last FROM key_seqs k JOIN topics t ON t.uid = k.topic_uid ORDER BY 1, 2')
      .raw()
      .all();
    const all = db.prepare('SELECT count(*) FROM key_seqs').pluck().get();
    db.close();
    // The deleted topic's rows (one per key it ever had) stayed for good.
    expect({ rows, all }).toEqual({
      rows: [
        ['projects/p/topics/kept', 'k1', 1],
        ['projects/p/topics/kept', 'k2', 1],
      ],
      all: 2,
    });
    ({ core } = await openCore(dir.path, clock)); // for afterEach
  });
});

describe('compactionPlan', () => {
  const view = (name: string, low: number, retentionSeconds: number) => ({
    name,
    topicUid: 1,
    retainAckedMessages: false,
    messageRetentionDuration: retentionSeconds,
    lowestHeldSeq: () => low,
    expiredBefore: Infinity,
  });

  it("keeps one condition per distinct need, and at most 64 (SQLite's expression depth) for any number of subscriptions", () => {
    const now = 10_000_000;
    const same = compactionPlan([view('a', 11, 600), view('b', 21, 600), view('c', 31, 700)], [], 100, now);
    // 'b' needs nothing 'a' does not (a later seq, the same retention).
    expect(same.topics.get(1)?.needs).toEqual([
      [30, now - 700_000],
      [10, now - 600_000],
    ]);
    const many = Array.from({ length: 2000 }, (_, i) => view(`s${i}`, 1000 + i, 600 + i));
    const needs = compactionPlan(many, [], 5000, now).topics.get(1)!.needs;
    expect(needs).toHaveLength(64);
    // Whatever any subscription needs (seq > its mark, published since its cutoff) some condition keeps.
    for (const [i, s] of many.entries()) {
      const [afterSeq, since] = [s.lowestHeldSeq() - 1, now - s.messageRetentionDuration * 1000];
      expect(
        needs.some(([a, t]) => a <= afterSeq && t <= since),
        `s${i}`,
      ).toBe(true);
    }
  });
});
