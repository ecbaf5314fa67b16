import Database from 'better-sqlite3';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { StoreUpgradeError } from '../../src/store/store.js';
import { orderly } from '../helpers/cli.js';
import { openCore } from '../helpers/core.js';
import { tempDirPerTest } from '../helpers/temp-dir-per-test.js';

const dir = tempDirPerTest();

/** A store in the test's directory as schema 2 wrote it: topic orders, subscription work (its uid returned), message k1 of key k. */
async function schema2Store(): Promise<{ file: string; uid: string; clock: Awaited<ReturnType<typeof openCore>>['clock'] }> {
  const { core, clock } = await openCore(dir.path);
  await core.createTopic('orders');
  await core.createSubscription('work', { topic: 'orders', enableMessageOrdering: true });
  await core.publish('orders', [{ data: 'k1', orderingKey: 'k' }]);
  const uid = core.identity('work').uid;
  await core.close();

  // Exactly what schema 2 wrote: no snapshot tables, no detached or acks_retained_after column.
  const file = join(dir.path, 'orderly.sqlite');
  const db = new Database(file);
  db.exec(
    'DROP TABLE snapshots; DROP TABLE snapshot_acks; ALTER TABLE subscriptions DROP COLUMN detached; ALTER TABLE subscriptions DROP COLUMN acks_retained_after',
  );
  db.prepare("UPDATE meta SET v = '2' WHERE k = 'schema'").run();
  db.close();
  return { file, uid, clock };
}

describe('schema 2 -> 5', () => {
  it('a store made before snapshots keeps its subscriptions, backlog and ids, and gains snapshots, detach and where retention began', async () => {
    const { file, uid, clock } = await schema2Store();
    const { core } = await openCore(dir.path, clock);
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

  it('a read-only command refuses the store, saying how to upgrade it, and leaves it as it is; a writing command upgrades it', async () => {
    const { file } = await schema2Store();
    const before = readFileSync(file);
    expect(() => SqliteStore.open(dir.path, { exports: false, upgrade: false })).toThrow(StoreUpgradeError);
    const job = join(dir.path, 'job.yaml');
    writeFileSync(job, `dataDir: ${dir.path}\n`);
    // Before: the query answered, and the store it opened was schema 4 from then on.
    const query = await orderly('query', job, 'SELECT 1 AS n', '--json');
    expect(query.code).toBe(1);
    expect(query.stderr).toContain(
      `orderly: the Orderly store at ${file} was written by an older Orderly (store schema 2) and needs an upgrade`,
    );
    expect(JSON.parse(query.stdout)).toMatchObject({ error: { code: 'FAILED_PRECONDITION' } });
    expect(readFileSync(file).equals(before)).toBe(true);

    expect((await orderly('status', job)).code).toBe(0);
    const after = await orderly('query', job, 'SELECT 1 AS n', '--json');
    expect([after.code, after.stderr, JSON.parse(after.stdout)]).toEqual([0, '', [{ n: 1 }]]);
  }, 60_000);
});
