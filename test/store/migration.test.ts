import Database from 'better-sqlite3';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openCore } from '../helpers/core.js';
import { tempDirPerTest } from '../helpers/temp-dir-per-test.js';

const dir = tempDirPerTest();

describe('schema 2 -> 5', () => {
  it('a store made before snapshots keeps its subscriptions, backlog and ids, and gains snapshots, detach and where retention began', async () => {
    const opened = await openCore(dir.path);
    let { core } = opened;
    await core.createTopic('orders');
    await core.createSubscription('work', { topic: 'orders', enableMessageOrdering: true });
    await core.publish('orders', [{ data: 'k1', orderingKey: 'k' }]);
    const uid = core.identity('work').uid;
    await core.close();

    // Make it exactly what schema 2 wrote: no snapshot tables, no detached or acks_retained_after column.
    const file = join(dir.path, 'orderly.sqlite');
    const db = new Database(file);
    db.exec(
      'DROP TABLE snapshots; DROP TABLE snapshot_acks; ALTER TABLE subscriptions DROP COLUMN detached; ALTER TABLE subscriptions DROP COLUMN acks_retained_after',
    );
    db.prepare("UPDATE meta SET v = '2' WHERE k = 'schema'").run();
    db.close();

    ({ core } = await openCore(dir.path, opened.clock));
    expect(core.identity('work').uid).toBe(uid);
    expect(core.getSubscription('work').detached).toBe(false);
    await core.createSnapshot('after-upgrade', { subscription: 'work' });
    const [k1] = await core.pull('work');
    expect(k1!.message.data.toString()).toBe('k1');
    await core.acknowledge('work', [k1!.ackId]);
    await core.seekToSnapshot('work', 'after-upgrade');
    expect((await core.pull('work')).map((m) => m.message.data.toString())).toEqual(['k1']);
    await core.detachSubscription('work');
    await core.close();

    const check = new Database(file, { readonly: true });
    expect(check.prepare("SELECT v FROM meta WHERE k = 'schema'").pluck().get()).toBe('5');
    expect(check.prepare('SELECT detached FROM subscriptions').pluck().all()).toEqual([1]);
    // Where its retention began is not known for a subscription from before: 0, a seek's rule as it was.
    expect(check.prepare('SELECT acks_retained_after FROM subscriptions').pluck().all()).toEqual([0]);
    check.close();
  });
});
