import Database from 'better-sqlite3';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { PubSubCore } from '../../src/core/pubsub-core.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { StoreCorruptError } from '../../src/store/store.js';
import { openCore } from '../helpers/core.js';
import { tempDirPerTest } from '../helpers/temp-dir-per-test.js';

const dir = tempDirPerTest();

describe('restart on the same store', () => {
  it('keeps topics, subscriptions, acks and per-key order; unacked messages come again', async () => {
    const clock = new ManualClock();
    let { core } = await openCore(dir.path, clock);
    await core.createTopic('orders');
    await core.createSubscription('ordered', { topic: 'orders', enableMessageOrdering: true, ackDeadlineSeconds: 30 });
    for (const [k, d] of [
      ['a', 'a1'],
      ['a', 'a2'],
      ['a', 'a3'],
      ['b', 'b1'],
      ['b', 'b2'],
    ]) {
      await core.publish('orders', [{ data: d, orderingKey: k }]);
    }
    const batch = await core.pull('ordered', { maxMessages: 10 });
    const byData = new Map(batch.map((m) => [m.message.data.toString(), m]));
    // b fully acked; a: a1 acked, a3 acked, a2 outstanding
    await core.acknowledge(
      'ordered',
      ['b1', 'b2', 'a1', 'a3'].map((d) => byData.get(d)!.ackId),
    );
    await core.close();

    ({ core } = await openCore(dir.path, clock));
    expect(core.getSubscription('ordered').ackDeadlineSeconds).toBe(30);
    const again = await core.pull('ordered', { maxMessages: 10 });
    // a2 was never acked: it and every later message of a come again (a3 included); b stays acked
    expect(again.map((m) => m.message.data.toString())).toEqual(['a2', 'a3']);
    await core.acknowledge(
      'ordered',
      again.map((m) => m.ackId),
    );
    const id = await core.publish('orders', [{ data: 'a4', orderingKey: 'a' }]);
    const next = await core.pull('ordered');
    expect(next.map((m) => [m.message.data.toString(), m.message.sequence, m.message.messageId])).toEqual([['a4', 4, id[0]]]);
    await core.close();
  });

  it('failure counts survive a restart (deliveryAttempt continues)', async () => {
    const clock = new ManualClock();
    let { core } = await openCore(dir.path, clock);
    await core.createTopic('orders');
    await core.createTopic('dead');
    await core.createSubscription('dls', { topic: 'orders', deadLetterPolicy: { deadLetterTopic: 'dead' } });
    await core.publish('orders', [{ data: 'x' }]);
    for (let i = 0; i < 2; i++) {
      const [m] = await core.pull('dls');
      await core.modifyAckDeadline('dls', [m!.ackId], 0);
    }
    await core.close();
    ({ core } = await openCore(dir.path, clock));
    expect((await core.pull('dls'))[0]!.deliveryAttempt).toBe(3);
    await core.close();
  });

  it('compaction removes acked messages but never an unacked one, and ids keep growing', async () => {
    const clock = new ManualClock();
    let { core } = await openCore(dir.path, clock);
    await core.createTopic('orders');
    await core.createSubscription('ordered', { topic: 'orders', enableMessageOrdering: true });
    const ids = await core.publish(
      'orders',
      Array.from({ length: 10 }, (_, i) => ({ data: String(i), orderingKey: i < 5 ? 'a' : 'b' })),
    );
    const got = await core.pull('ordered', { maxMessages: 100 });
    await core.acknowledge(
      'ordered',
      got.filter((m) => m.message.orderingKey === 'a').map((m) => m.ackId),
    );
    const { deletedMessages } = await core.compact();
    expect(deletedMessages).toBe(5);
    await core.close();
    ({ core } = await openCore(dir.path, clock));
    const again = await core.pull('ordered', { maxMessages: 100 });
    expect(again.map((m) => m.message.data.toString())).toEqual(['5', '6', '7', '8', '9']);
    await core.acknowledge(
      'ordered',
      again.map((m) => m.ackId),
    );
    await core.compact();
    await core.close();
    ({ core } = await openCore(dir.path, clock));
    const [next] = await core.publish('orders', [{ data: 'n', orderingKey: 'a' }]);
    expect(Number(next)).toBeGreaterThan(Number(ids.at(-1)));
    expect((await core.pull('ordered'))[0]!.message.sequence).toBe(6);
    await core.close();
  });
});

describe('a store made before schemas and topic settings', () => {
  it('opens with its topics as they were; the added tables and column come once, and hold what is set after', async () => {
    let { core } = await openCore(dir.path);
    await core.createTopic('orders', { labels: { team: 'a' } });
    await core.close();
    // What the version before wrote: no schemas or IAM tables, no topics.settings column, no marker.
    const db = new Database(join(dir.path, 'orderly.sqlite'));
    db.exec(
      "DROP TABLE schemas; DROP TABLE iam_policies; ALTER TABLE topics DROP COLUMN settings; DELETE FROM meta WHERE k = 'topic_settings';",
    );
    db.close();
    ({ core } = await openCore(dir.path));
    expect(core.getTopic('orders')).toEqual({ name: 'projects/p/topics/orders', labels: { team: 'a' }, state: 'ACTIVE' });
    await core.schemas.create({ parent: 'projects/p', schemaId: 'plain', schema: { type: 'AVRO', definition: '"string"' } });
    await core.updateTopic('orders', {
      messageRetentionDuration: '1h',
      schemaSettings: { schema: 'projects/p/schemas/plain', encoding: 'JSON' },
    });
    await core.close();
    ({ core } = await openCore(dir.path));
    expect(core.getTopic('orders')).toMatchObject({
      messageRetentionDuration: 3600,
      schemaSettings: { schema: 'projects/p/schemas/plain' },
    });
    expect(core.schemas.has('projects/p/schemas/plain')).toBe(true);
    await core.close();
  });
});

describe('a bad store file is an error naming the file, never a reset', () => {
  it('garbage bytes', async () => {
    const file = join(dir.path, 'orderly.sqlite');
    writeFileSync(file, Buffer.alloc(8192, 0x5a));
    expect(() => SqliteStore.open(dir.path)).toThrow(StoreCorruptError);
    expect(() => SqliteStore.open(dir.path)).toThrow(file);
    expect(readFileSync(file).every((b) => b === 0x5a)).toBe(true);
  });

  it('a foreign SQLite database', () => {
    const db = new Database(join(dir.path, 'orderly.sqlite'));
    db.exec('CREATE TABLE users(id INTEGER)');
    db.close();
    expect(() => SqliteStore.open(dir.path)).toThrow('not an Orderly store (foreign SQLite file)');
  });

  /** A store of 500 messages, then `damage` applied to its file; returns the damaged bytes. */
  async function damagedStore(damage: (bytes: Buffer, pageSize: number, file: string) => void): Promise<Buffer> {
    const { core } = await openCore(dir.path);
    await core.createTopic('orders');
    await core.publish(
      'orders',
      Array.from({ length: 500 }, (_, i) => ({ data: 'x'.repeat(500) + i })),
    );
    await core.close();
    const file = join(dir.path, 'orderly.sqlite');
    const bytes = readFileSync(file);
    damage(bytes, bytes.readUInt16BE(16) === 1 ? 65536 : bytes.readUInt16BE(16), file); // page size: SQLite's file header
    writeFileSync(file, bytes);
    return bytes;
  }

  it("a damaged page of the store's structure stops the open, naming the file", async () => {
    await damagedStore((bytes, pageSize) => bytes.fill(0xff, pageSize * 3, pageSize * 3 + 2000));
    await expect(async () => PubSubCore.open({ store: SqliteStore.open(dir.path) })).rejects.toThrow(/orderly\.sqlite cannot be read/);
  });

  it('a damaged page of messages: found by the whole-file check after opening, every later write refused, the file left as it is', async () => {
    const file = join(dir.path, 'orderly.sqlite');
    const bytes = await damagedStore((bytes, pageSize) => {
      const db = new Database(file, { readonly: true });
      const page = db
        .prepare("SELECT pageno FROM dbstat WHERE name = 'messages' AND pagetype = 'leaf' ORDER BY pageno LIMIT 1 OFFSET 2")
        .pluck()
        .get() as number;
      db.close();
      bytes.fill(0xff, (page - 1) * pageSize + 200, (page - 1) * pageSize + 2200);
    });
    // Opening checks the small tables at once and the whole file on a thread of its own (store-check.ts).
    let reportFatal!: (e: Error) => void;
    const fatal = new Promise<Error>((resolve) => (reportFatal = resolve));
    const damaged = await PubSubCore.open({ store: SqliteStore.open(dir.path), projectId: 'p', onStoreFatal: reportFatal }); // opens fast
    expect((await fatal).message).toMatch(/orderly\.sqlite is damaged \(integrity check failed/);
    await expect(damaged.publish('orders', [{ data: 'more' }])).rejects.toThrow(/integrity check failed/);
    // The rare writes on the store's own connection stop too.
    await expect(damaged.createTopic('other')).rejects.toThrow(/integrity check failed/);
    await damaged.close();
    expect(readFileSync(file).equals(bytes)).toBe(true);
  });
});
