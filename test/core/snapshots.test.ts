import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import type { ReceivedMessage } from '../../src/core/message.js';
import type { PubSubCore } from '../../src/core/pubsub-core.js';
import { openCore } from '../helpers/core.js';
import { tempDir } from '../helpers/temp-dir.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

let dir: ReturnType<typeof tempDir>;
let clock: ManualClock;
let core: PubSubCore;

/** Coarse timers: these tests move the clock by days. */
const open = async () => (await openCore(dir.path, clock, { tickMs: 60_000, compactEveryMs: DAY * 30 })).core;
async function restart(): Promise<void> {
  await core.close();
  core = await open();
}

beforeEach(async () => {
  dir = tempDir();
  clock = new ManualClock();
  core = await open();
  await core.createTopic('orders');
});
afterEach(async () => {
  await core.close();
  dir.remove();
});

const texts = (ms: ReceivedMessage[]) => ms.map((m) => m.message.data.toString());
const byText = (ms: ReceivedMessage[], ...wanted: string[]) =>
  ms.filter((m) => wanted.includes(m.message.data.toString())).map((m) => m.ackId);
async function publish(...items: (string | [key: string, data: string])[]): Promise<void> {
  for (const item of items) {
    const [orderingKey, data] = typeof item === 'string' ? ['', item] : item;
    await core.publish('orders', [{ data, orderingKey }]);
  }
}
const pull = (sub: string) => core.pull(sub, { maxMessages: 1000 });
/** Everything the subscription delivers now, acked as it comes (each key's batches in turn). */
async function drain(sub: string): Promise<string[]> {
  const seen: string[] = [];
  for (let batch = await pull(sub); batch.length; batch = await pull(sub)) {
    seen.push(...texts(batch));
    await core.acknowledge(
      sub,
      batch.map((m) => m.ackId),
    );
  }
  return seen;
}

describe('snapshots', () => {
  it('seek to a snapshot restores exactly its ack state: the unacked messages of then, and everything published after', async () => {
    await core.createSubscription('work', { topic: 'orders' });
    await publish('m1', 'm2', 'm3', 'm4');
    const first = await pull('work');
    await core.acknowledge('work', byText(first, 'm1', 'm3'));
    // m2 and m4 are still out (unacked) when the snapshot is taken
    const snapshot = await core.createSnapshot('before-fix', { subscription: 'work', labels: { team: 'billing' } });
    expect(snapshot).toEqual({
      name: 'projects/p/snapshots/before-fix',
      topic: 'projects/p/topics/orders',
      expireTime: clock.now() + 7 * DAY,
      labels: { team: 'billing' },
    });
    await core.acknowledge('work', byText(first, 'm2', 'm4'));
    await publish('m5');
    expect(await drain('work')).toEqual(['m5']);

    await core.seekToSnapshot('work', 'before-fix');
    expect((await drain('work')).sort()).toEqual(['m2', 'm4', 'm5']);
    // the snapshot is unchanged by the seek: seeking again replays the same set
    await core.seekToSnapshot('work', 'projects/p/snapshots/before-fix');
    expect((await drain('work')).sort()).toEqual(['m2', 'm4', 'm5']);
  });

  it('ordered: after the seek each key comes in order, and an acked message after an unacked one of its key comes again', async () => {
    await core.createSubscription('ordered', { topic: 'orders', enableMessageOrdering: true });
    await publish(['a', 'a1'], ['a', 'a2'], ['a', 'a3'], ['b', 'b1'], ['b', 'b2'], ['c', 'c1'], ['c', 'c2']);
    const batch = await pull('ordered');
    // a: a1 and a3 acked, a2 not; b fully acked; c not at all
    await core.acknowledge('ordered', byText(batch, 'a1', 'a3', 'b1', 'b2'));
    await core.createSnapshot('mid', { subscription: 'ordered' });
    await core.acknowledge('ordered', byText(batch, 'a2', 'c1', 'c2'));
    await publish(['b', 'b3']);
    expect(await drain('ordered')).toEqual(['b3']);

    await core.seekToSnapshot('ordered', 'mid');
    const replay = await pull('ordered');
    const key = (k: string) => texts(replay.filter((m) => m.message.orderingKey === k));
    expect(key('a')).toEqual(['a2', 'a3']);
    expect(key('b')).toEqual(['b3']);
    expect(key('c')).toEqual(['c1', 'c2']);
    expect(replay).toHaveLength(5);
  });

  it('another subscription of the topic may seek to it; one of another topic may not', async () => {
    await core.createTopic('other');
    await core.createSubscription('source', { topic: 'orders' });
    await core.createSubscription('elsewhere', { topic: 'other' });
    await publish('m1', 'm2');
    await core.acknowledge('source', byText(await pull('source'), 'm1'));
    await core.createSnapshot('snap', { subscription: 'source' });
    await core.createSubscription('later', { topic: 'orders' });
    await core.seekToSnapshot('later', 'snap');
    expect(await drain('later')).toEqual(['m2']);
    await expect(core.seekToSnapshot('elsewhere', 'snap')).rejects.toMatchObject({
      code: 'FAILED_PRECONDITION',
      message: expect.stringContaining('a subscription can only seek to a snapshot of its own topic'),
    });
  });

  it('answers ALREADY_EXISTS, NOT_FOUND and INVALID_ARGUMENT as Pub/Sub does', async () => {
    await core.createSubscription('work', { topic: 'orders' });
    await core.createSnapshot('snap', { subscription: 'work' });
    await expect(core.createSnapshot('snap', { subscription: 'work' })).rejects.toMatchObject({ code: 'ALREADY_EXISTS' });
    await expect(core.createSnapshot('other', { subscription: 'missing' })).rejects.toMatchObject({
      code: 'NOT_FOUND',
      message: 'Subscription not found: projects/p/subscriptions/missing',
    });
    expect(() => core.getSnapshot('missing')).toThrow(
      expect.objectContaining({ code: 'NOT_FOUND', message: 'Snapshot not found: projects/p/snapshots/missing' }),
    );
    await expect(core.seekToSnapshot('work', 'missing')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(core.deleteSnapshot('missing')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(core.createSnapshot('projects/p/topics/snap', { subscription: 'work' })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    await expect(core.createSnapshot('x', { subscription: 'work' })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringMatching(/^name: invalid id/),
    });
    // Without a name (gRPC allows it) the snapshot gets one in the subscription's project.
    expect((await core.createSnapshot('', { subscription: 'work' })).name).toMatch(/^projects\/p\/snapshots\/snapshot-[0-9a-f-]{36}$/);
  });

  it('lives 7 days from its oldest unacked message; refused when that leaves less than an hour', async () => {
    await core.createSubscription('work', { topic: 'orders' });
    const publishedAt = clock.now();
    await publish('old');
    clock.advance(3 * DAY);
    await publish('new');
    expect((await core.createSnapshot('three-days', { subscription: 'work' })).expireTime).toBe(publishedAt + 7 * DAY);
    clock.advance(4 * DAY - HOUR + 1);
    await expect(core.createSnapshot('too-old', { subscription: 'work' })).rejects.toMatchObject({
      code: 'FAILED_PRECONDITION',
      message: expect.stringContaining('would expire in less than 1 hour'),
    });
    // once the old message is acked, the oldest one it holds is a younger one
    const [old] = await pull('work');
    await core.acknowledge('work', [old!.ackId]);
    expect((await core.createSnapshot('young', { subscription: 'work' })).expireTime).toBe(publishedAt + 3 * DAY + 7 * DAY);
  });

  it("a seek to a snapshot deleted meanwhile fails without undoing a seek back sent just before it: that one's replay comes", async () => {
    await core.createSubscription('work', { topic: 'orders', retainAckedMessages: true });
    await publish('m1', 'm2', 'm3');
    expect(await drain('work')).toEqual(['m1', 'm2', 'm3']);
    await core.createSnapshot('gone-soon', { subscription: 'work' });
    // Both seeks at once: the second, failing, read the backlog again from where it was before the first.
    const results = await Promise.allSettled([
      core.seek('work', 0),
      core.seekToSnapshot('work', 'gone-soon'),
      core.deleteSnapshot('gone-soon'),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(core.metrics('work').backlogMessages).toBe(3);
    expect(await drain('work')).toEqual(['m1', 'm2', 'm3']);
  });

  it('a compaction that starts while a seek runs leaves its replay durable: after a restart it comes', async () => {
    await core.createSubscription('work', { topic: 'orders', retainAckedMessages: true });
    await publish('m1', 'm2', 'm3');
    await core.createSnapshot('all', { subscription: 'work' });
    expect(await drain('work')).toEqual(['m1', 'm2', 'm3']);
    await core.compact(); // the store's watermark is past m3
    // Each seek with a compaction begun right after it (as the 30 s timer may): the compaction must not
    // raise the watermark back from where the subscription stood before the seek.
    for (const seek of [() => core.seekToSnapshot('work', 'all'), () => core.seek('work', 0)]) {
      await Promise.all([seek(), core.compact()]);
      await restart();
      expect(await drain('work')).toEqual(['m1', 'm2', 'm3']);
      await core.compact();
    }
  });

  it('an expired snapshot is gone: not found, not listed, deleted in the background, and its messages may go', async () => {
    await core.createSubscription('work', { topic: 'orders' });
    await publish('m1');
    await core.createSnapshot('short', { subscription: 'work' });
    await drain('work');
    expect((await core.compact()).deletedMessages).toBe(0); // the snapshot holds m1
    clock.advance(7 * DAY);
    expect(() => core.getSnapshot('short')).toThrow(expect.objectContaining({ code: 'NOT_FOUND' }));
    expect(core.listSnapshots()).toEqual([]);
    expect((await core.compact()).deletedMessages).toBe(1);
    await restart();
    expect(core.listSnapshots()).toEqual([]);
    // its name is free again
    await core.createSnapshot('short', { subscription: 'work' });
  });

  it('a snapshot created under the name of one that expired starts with an empty IAM policy, before the sweep ran', async () => {
    await core.createSubscription('work', { topic: 'orders' });
    await publish('m1');
    await core.createSnapshot('named', { subscription: 'work' });
    const policy = { version: 1, bindings: [{ role: 'roles/owner', members: ['allUsers'] }], auditConfigs: [], etag: '' };
    await core.iam.set('projects/p/snapshots/named', policy);
    await drain('work');
    clock.advance(7 * DAY);
    await publish('m2');
    await core.createSnapshot('named', { subscription: 'work' });
    expect(core.iam.get('projects/p/snapshots/named')).toMatchObject({ bindings: [], etag: 'ACAB' });
  });

  it('survives a restart: listed with its labels, and a seek after the restart restores it', async () => {
    await core.createSubscription('ordered', { topic: 'orders', enableMessageOrdering: true });
    await publish(['k', 'k1'], ['k', 'k2']);
    await core.createSnapshot('durable', { subscription: 'ordered', labels: { env: 'test' } });
    expect(await drain('ordered')).toEqual(['k1', 'k2']);
    await core.compact();
    await restart();
    expect(core.listSnapshots()).toEqual([
      {
        name: 'projects/p/snapshots/durable',
        topic: 'projects/p/topics/orders',
        expireTime: clock.now() + 7 * DAY,
        labels: { env: 'test' },
      },
    ]);
    expect(core.listTopicSnapshots('orders')).toEqual(['projects/p/snapshots/durable']);
    expect(await drain('ordered')).toEqual([]);
    await core.seekToSnapshot('ordered', 'durable');
    expect(await drain('ordered')).toEqual(['k1', 'k2']);
  });

  it("compaction keeps what a live snapshot can restore, also past the subscriptions' retention; deleting it frees them", async () => {
    await core.createSubscription('short', { topic: 'orders', messageRetentionDuration: '10m' });
    await publish('m1', 'm2');
    await core.createSnapshot('keep', { subscription: 'short' });
    await publish('m3');
    expect(await drain('short')).toEqual(['m1', 'm2', 'm3']);
    clock.advance(20 * 60_000);
    expect((await core.compact()).deletedMessages).toBe(0);
    // a subscription with a longer retention gets all of them back from the snapshot
    await core.createSubscription('long', { topic: 'orders' });
    await core.seekToSnapshot('long', 'keep');
    expect((await drain('long')).sort()).toEqual(['m1', 'm2', 'm3']);
    await core.deleteSnapshot('keep');
    expect((await core.compact()).deletedMessages).toBe(3);
  });

  it("a deleted topic's messages go once nothing refers to them: its subscriptions and snapshots deleted, also across a restart", async () => {
    await core.createSubscription('work', { topic: 'orders' });
    await publish('m1', 'm2');
    await core.createSnapshot('keep', { subscription: 'work' });
    await core.deleteTopic('orders');
    await core.deleteSubscription('work');
    expect((await core.compact()).deletedMessages).toBe(0); // the snapshot holds them
    await core.deleteSnapshot('keep');
    await restart();
    // No plan names the topic any more (it is in no live topic, subscription or snapshot): they stayed for good.
    expect((await core.compact()).deletedMessages).toBe(2);
  });

  it('counts what a snapshot keeps a budget at a time, then only what was published since; expired or deleted, it is gone', async () => {
    await core.createSubscription('work', { topic: 'orders' });
    await publish('m1', 'm2', 'm3', 'm4', 'm5');
    const snap = await core.createSnapshot('keep', { subscription: 'work' });
    expect(await drain('work')).toHaveLength(5);
    const held = (budget: number) =>
      core.snapshotHoldings(budget).map(({ name, messages, bytes, counted }) => ({ name, messages, bytes, counted }));
    const keep = 'projects/p/snapshots/keep';
    expect(held(2)).toEqual([{ name: keep, messages: 2, bytes: 4, counted: false }]);
    expect(held(2)).toEqual([{ name: keep, messages: 4, bytes: 8, counted: false }]);
    expect(held(2)).toEqual([{ name: keep, messages: 5, bytes: 10, counted: true }]);
    await publish('m6', 'm7');
    // Counted whole once, it is brought up to date within the budget too, and compaction deletes none of it.
    expect((await core.compact()).deletedMessages).toBe(0);
    expect(held(0)).toEqual([{ name: keep, messages: 5, bytes: 10, counted: true }]);
    expect(held(1)).toEqual([{ name: keep, messages: 6, bytes: 12, counted: true }]);
    expect(held(5)).toEqual([{ name: keep, messages: 7, bytes: 14, counted: true }]);
    expect(core.snapshotHoldings(0)[0]).toMatchObject({ topic: 'projects/p/topics/orders', expireTime: snap.expireTime });
    await restart();
    expect(held(Infinity)).toEqual([{ name: keep, messages: 7, bytes: 14, counted: true }]);
    clock.advance(snap.expireTime - clock.now());
    expect(held(Infinity)).toEqual([]);
  });

  it('update changes labels and shortens the expiry (never past 7 days from its oldest message); list by project and topic', async () => {
    await core.createTopic('other');
    await core.createSubscription('work', { topic: 'orders' });
    await core.createSubscription('elsewhere', { topic: 'other' });
    const created = await core.createSnapshot('b-snap', { subscription: 'work', labels: { a: '1' } });
    await core.createSnapshot('a-snap', { subscription: 'elsewhere' });
    await core.createSnapshot('projects/q/snapshots/q-snap', { subscription: 'work' });
    expect((await core.updateSnapshot('b-snap', { labels: { b: '2' } })).labels).toEqual({ b: '2' });
    const sooner = clock.now() + DAY;
    expect(await core.updateSnapshot('b-snap', { expireTime: sooner })).toMatchObject({ expireTime: sooner, labels: { b: '2' } });
    // and back up to the lifetime it got at creation, but not beyond it nor into the past
    await core.updateSnapshot('b-snap', { expireTime: created.expireTime });
    await expect(core.updateSnapshot('b-snap', { expireTime: created.expireTime + 1 })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringMatching(/^snapshot\.expireTime: /),
    });
    await expect(core.updateSnapshot('b-snap', { expireTime: clock.now() })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(core.listSnapshots().map((s) => s.name)).toEqual(['projects/p/snapshots/a-snap', 'projects/p/snapshots/b-snap']);
    expect(core.listSnapshots('q').map((s) => s.name)).toEqual(['projects/q/snapshots/q-snap']);
    expect(core.listTopicSnapshots('orders')).toEqual(['projects/p/snapshots/b-snap', 'projects/q/snapshots/q-snap']);
    await core.deleteTopic('other');
    expect(core.getSnapshot('a-snap').topic).toBe('_deleted-topic_');
    await restart();
    expect(core.getSnapshot('b-snap')).toMatchObject({ expireTime: created.expireTime, labels: { b: '2' } });
  });
});
