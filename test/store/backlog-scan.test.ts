import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PubSubCore } from '../../src/core/pubsub-core.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { tempDir } from '../helpers/temp-dir.js';

// Payloads up to 64 KiB come with their row; a larger one is read alone, and only within the caller's budget.
const sizes = [0, 1024, 64 * 1024, 64 * 1024 + 1, 200_000, 1024];
const payload = (i: number) => Buffer.alloc(sizes[i]!, String.fromCharCode(97 + i));

let dir: ReturnType<typeof tempDir>;
let store: SqliteStore;
let core: PubSubCore;
let source: { name: string; topicUid: number };

beforeEach(async () => {
  dir = tempDir();
  store = SqliteStore.open(dir.path, { durability: 'process' });
  core = await PubSubCore.open({ store, projectId: 'p' });
  await core.createTopic('events');
  await core.publish(
    'events',
    sizes.map((_, i) => ({ data: payload(i), attributes: { n: String(i) }, orderingKey: 'k' })),
  );
  await core.flushed();
  const topic = (await store.listTopics()).find((t) => t.name === 'projects/p/topics/events')!;
  source = { name: 'projects/p/subscriptions/none', topicUid: topic.uid };
});
afterEach(async () => {
  await core.close();
  dir.remove();
});

describe('a backlog scan', () => {
  it('gives every row its payload size, and the payloads in order while the budget lasts', () => {
    const rows = store.scan(source, 0, 100, Number.MAX_SAFE_INTEGER);
    expect(rows.map((r) => r.dataBytes)).toEqual(sizes);
    expect(rows.map((r) => r.message.attributes.n)).toEqual(sizes.map((_, i) => String(i)));
    expect(rows.map((r, i) => r.message.data.equals(payload(i)))).toEqual(sizes.map(() => true));

    // Room for the first four only: what is read stays a prefix (the later small one is not read either).
    const budget = sizes.slice(0, 4).reduce((a, b) => a + b, 0);
    const partial = store.scan(source, 0, 100, budget);
    expect(partial.map((r) => r.dataBytes)).toEqual(sizes);
    expect(partial.map((r) => r.message.data.byteLength)).toEqual([0, 1024, 64 * 1024, 64 * 1024 + 1, 0, 0]);
  });
});

describe('acks as the writer stores them', () => {
  it('stores every seq of a request (repeats within it and across requests included); a scan shows exactly those acked, and the failure counts', async () => {
    const all = store.scan(source, 0, 100, 0).map((r) => r.message.seq);
    await Promise.all([store.ack(source.name, [all[1]!, all[3]!, all[1]!]), store.ack(source.name, [all[3]!, all[5]!])]);
    await store.ack(source.name, [all[5]!]);
    await store.setFailures(source.name, all[2]!, 4);
    const rows = store.scan(source, 0, 100, 0);
    expect(rows.map((r) => r.acked)).toEqual([false, true, false, true, false, true]);
    expect(rows.map((r) => r.failures)).toEqual([0, 0, 4, 0, 0, 0]);
    // The same, read per key (the other query) and counted.
    expect(store.scanKey(source, 'k', 1, all[5]!, 100, 0).map((r) => r.acked)).toEqual([false, true, false, true, false, true]);
    expect(store.countUnacked(source, 0, all[5]!)).toBe(3);
    // And the unacked rows' attributes, for a filtered subscription's count; the range's end included.
    expect(store.unackedAttributes(source, all[0]!, all[4]!)).toEqual([
      { seq: all[2]!, attributes: { n: '2' } },
      { seq: all[4]!, attributes: { n: '4' } },
    ]);
  });
});
