import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import type { PubSubCore } from '../../src/core/pubsub-core.js';
import { openCore, pullAndAck, settle } from '../helpers/core.js';
import { tempDir } from '../helpers/temp-dir.js';

/**
 * A subscription nobody reads: its messages past messageRetentionDuration leave its backlog count and its
 * oldest-unacked age on the core's own timer, as Pub/Sub's num_undelivered_messages and
 * oldest_unacked_message_age never count them, though no consumer takes (and so drops) them.
 */
const RETENTION_MS = 10 * 60_000;
/** A small window, so that most of a backlog waits in the store (and an ordered key overflows). */
const MEMORY = { messagesPerSubscription: 20, messagesPerKey: 5 };

let dir: ReturnType<typeof tempDir>;
let clock: ManualClock;
let core: PubSubCore;

async function open(): Promise<PubSubCore> {
  // Compaction runs only when a test calls it.
  return (await openCore(dir.path, clock, { memory: MEMORY, compactEveryMs: 30 * 86_400_000 })).core;
}

/**
 * Time passes a second at a time, the event loop turning in between: the window refills, and an expiry
 * step runs a turn (5,000 rows each), so a second's turns cover every backlog here.
 */
async function pass(ms: number): Promise<void> {
  for (let t = 0; t < ms; t += 1_000) {
    clock.advance(Math.min(1_000, ms - t));
    await settle(core);
    for (let turn = 0; turn < 10; turn++) await new Promise((resolve) => setImmediate(resolve));
  }
}

/** `n` messages, in batches of 1,000 (Pub/Sub's most per publish). */
async function publish(data: string, n: number, orderingKey = ''): Promise<void> {
  for (let from = 0; from < n; from += 1_000)
    await core.publish(
      'events',
      Array.from({ length: Math.min(1_000, n - from) }, (_, i) => ({ data: `${data}-${from + i}`, orderingKey })),
    );
}

function status(sub: string): { backlog: number; ageMs: number | undefined } {
  const m = core.metrics(sub);
  const oldest = m.oldestUnackedPublishTime;
  return { backlog: m.backlogMessages, ageMs: oldest === undefined ? undefined : clock.now() - oldest };
}

beforeEach(async () => {
  dir = tempDir();
  clock = new ManualClock();
  core = await open();
  await core.createTopic('events');
});
afterEach(async () => {
  await core.close();
  dir.remove();
});

describe('a subscription nobody reads', () => {
  it('counts nothing past its retention, in memory or in the store, and its oldest age stays within it', async () => {
    await core.createSubscription('loose', { topic: 'events', messageRetentionDuration: '10m' });
    await core.createSubscription('ordered', { topic: 'events', enableMessageOrdering: true, messageRetentionDuration: '10m' });
    await core.createSubscription('filtered', { topic: 'events', messageRetentionDuration: '10m', filter: 'NOT attributes:x' });
    await publish('old', 300, 'k');
    await settle(core);
    await pass(6 * 60_000);
    await publish('young', 40, 'k');
    await settle(core);
    for (const sub of ['loose', 'ordered', 'filtered']) expect(status(sub).backlog).toBe(340);

    await pass(5 * 60_000);
    for (const sub of ['loose', 'ordered', 'filtered']) {
      const { backlog, ageMs } = status(sub);
      expect({ sub, backlog }).toEqual({ sub, backlog: 40 });
      expect(ageMs).toBeLessThanOrEqual(RETENTION_MS);
    }
    await pass(6 * 60_000);
    for (const sub of ['loose', 'ordered', 'filtered']) expect({ sub, ...status(sub) }).toEqual({ sub, backlog: 0, ageMs: undefined });
  });

  it('counts each message it drops unacked past retention, in memory or in the store, once', async () => {
    await core.createSubscription('loose', { topic: 'events', messageRetentionDuration: '10m' });
    await core.createSubscription('ordered', { topic: 'events', enableMessageOrdering: true, messageRetentionDuration: '10m' });
    await core.createSubscription('filtered', { topic: 'events', messageRetentionDuration: '10m', filter: 'NOT attributes:x' });
    await publish('old', 300, 'k');
    // Out to a consumer and not acked: dropped once its lease ended, past retention, as the others.
    const [out] = await core.pull('loose', { maxMessages: 1 });
    expect(out).toBeDefined();
    await pass(6 * 60_000);
    await publish('young', 40, 'k');
    await pass(5 * 60_000);
    await pass(6 * 60_000);
    for (const sub of ['loose', 'ordered', 'filtered'])
      expect({ sub, expired: core.metrics(sub).counters.retentionExpired }).toEqual({ sub, expired: 340 });
  });

  it('counts the expired messages a delivery passes over before the next tick sweeps them', async () => {
    await core.createSubscription('pulled', { topic: 'events', enableMessageOrdering: true, messageRetentionDuration: '10m' });
    // Fewer than the key's share of the window (5): the later one waits in memory behind them.
    await publish('old', 3, 'k');
    await settle(core);
    // Just past retention: the core's last tick came when they were still retained.
    clock.advance(RETENTION_MS + 1);
    await publish('young', 1, 'k');
    await settle(core);
    expect(await pullAndAck(core, 'pulled')).toEqual(['young-0']);
    expect(core.metrics('pulled').counters.retentionExpired).toBe(3);
  });

  it('counts the expired messages of a backlog from before a restart, the acked ones not', async () => {
    await core.createSubscription('unread', { topic: 'events', messageRetentionDuration: '10m' });
    // More than the restarted core counts in one step: the expiry passes rows its count has not reached.
    await publish('old', 25_000);
    const acked = await pullAndAck(core, 'unread');
    expect(acked.length).toBeGreaterThan(0);
    await core.close();
    clock.advance(11 * 60_000);
    core = await open();
    await pass(2_000);
    expect(status('unread').backlog).toBe(0);
    expect(core.metrics('unread').counters.retentionExpired).toBe(25_000 - acked.length);
  });

  it('messages it dropped past retention stay dropped after a clean restart, its retention raised meanwhile', async () => {
    await core.createSubscription('unread', { topic: 'events', messageRetentionDuration: '10m' });
    await publish('old', 300);
    await pass(6 * 60_000);
    await publish('young', 40);
    await pass(5 * 60_000);
    expect(status('unread').backlog).toBe(40);
    // Within Pub/Sub's 7 days again: what expired is gone all the same, as it is while the core runs.
    await core.updateSubscription('unread', { messageRetentionDuration: '1h' });
    await settle(core);
    expect(status('unread').backlog).toBe(40);

    await core.close();
    core = await open();
    core.countBacklogs();
    expect(status('unread').backlog).toBe(40);
    const got: string[] = [];
    for (let batch; (batch = await pullAndAck(core, 'unread')).length;) got.push(...batch);
    expect(got).toEqual(Array.from({ length: 40 }, (_, i) => `young-${i}`));
  });

  it("an ordered key's expired messages do not hold back its later ones", async () => {
    await core.createSubscription('ordered', { topic: 'events', enableMessageOrdering: true, messageRetentionDuration: '10m' });
    await publish('old', 30, 'k');
    await pass(6 * 60_000);
    await publish('young', 3, 'k');
    await pass(5 * 60_000);
    expect(status('ordered').backlog).toBe(3);
    expect(await pullAndAck(core, 'ordered')).toEqual(['young-0', 'young-1', 'young-2']);
  });

  it('counts after a compaction what it counts after a restart', async () => {
    await core.createSubscription('unread', { topic: 'events', messageRetentionDuration: '10m' });
    await publish('old', 300);
    await pass(6 * 60_000);
    await publish('young', 40);
    await pass(5 * 60_000);
    expect((await core.compact()).deletedMessages).toBe(300);
    const running = status('unread');

    await core.close();
    core = await open();
    core.countBacklogs();
    expect(status('unread')).toEqual(running);
    expect(running.backlog).toBe(40);
  });

  it('counts exactly when a compaction runs while the expiry of a long backlog is under way', async () => {
    await core.createSubscription('unread', { topic: 'events', messageRetentionDuration: '10m' });
    const start = clock.now();
    // More than one expiry step takes (10,000 rows): the rest expire in the next turns.
    await publish('old', 25_000);
    clock.advance(6 * 60_000);
    await publish('young', 40);
    await settle(core);
    clock.advance(start + RETENTION_MS + 50 - clock.now());
    await core.compact();
    await pass(1_000);
    expect(status('unread').backlog).toBe(40);
    await core.compact();
    expect(status('unread').backlog).toBe(40);
  });

  it('a seek back within retention brings back and counts the messages still retained, not the expired ones', async () => {
    await core.createSubscription('unread', { topic: 'events', retainAckedMessages: true, messageRetentionDuration: '10m' });
    const start = clock.now();
    await publish('old', 300);
    await pass(6 * 60_000);
    await publish('young', 40);
    await pass(5 * 60_000);
    expect(status('unread').backlog).toBe(40);
    await core.seek('unread', clock.now());
    await settle(core);
    expect(status('unread').backlog).toBe(0);

    await core.seek('unread', start);
    await settle(core);
    expect(status('unread').backlog).toBe(40);
    const got: string[] = [];
    for (let batch; (batch = await pullAndAck(core, 'unread')).length;) got.push(...batch);
    expect(got).toEqual(Array.from({ length: 40 }, (_, i) => `young-${i}`));
  });
});
