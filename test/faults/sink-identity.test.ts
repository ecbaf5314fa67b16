import Database from 'better-sqlite3';
import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auditSubscription } from '../../connectors/object-storage/audit.js';
import { parseObjectStorageConfig } from '../../connectors/object-storage/config.js';
import { Manifest } from '../../connectors/object-storage/manifest.js';
import { committedObjects } from '../helpers/committed-objects.js';
import { manifestPath } from '../../connectors/object-storage/object-writer.js';
import { closeDuckDb, queryDuckDb } from '../../src/duckdb/database.js';
import { SqliteStore, STORE_ID_FILE } from '../../src/store/sqlite-store.js';
import { StoreCorruptError, StoreIdentityError } from '../../src/store/store.js';
import { openCore } from '../helpers/core.js';
import { tempDir } from '../helpers/temp-dir.js';
import { tempDirPerTest } from '../helpers/temp-dir-per-test.js';
import { openExport } from '../helpers/export.js';
import { waitFor } from '../helpers/wait-for.js';
import { startTestS3, type TestS3 } from '../helpers/s3.js';

/**
 * Issue #9.2b: a zero-length orderly.sqlite was silently re-initialised — every subscription created
 * again, per-key sequences from 1 — and sinks that remembered the old sequences acked the new messages
 * as already written. Now an empty, missing or replaced store is refused, and sinks key their progress
 * by the subscription's uid (a subscription of a new store never matches an old one's progress).
 */
const dir = tempDirPerTest();

const bin = fileURLToPath(new URL('../../bin/orderly.js', import.meta.url));

describe('the store is never reset', () => {
  it('a zero-length store file is refused, naming it, and left as it is; the CLI exits 1', async () => {
    const { core } = await openCore(dir.path);
    await core.close();
    const file = join(dir.path, 'orderly.sqlite');
    for (const f of [file, `${file}-wal`, `${file}-shm`]) rmSync(f, { force: true });
    writeFileSync(file, '');
    expect(() => SqliteStore.open(dir.path)).toThrow(StoreCorruptError);
    expect(() => SqliteStore.open(dir.path)).toThrow(`the Orderly store at ${file} cannot be read (the file is empty (0 bytes)`);
    expect(statSync(file).size).toBe(0);

    writeFileSync(join(dir.path, 'job.yaml'), `dataDir: ${dir.path}\n`);
    const cli = await promisify(execFile)(process.execPath, [bin, 'status', join(dir.path, 'job.yaml')], { encoding: 'utf8' }).then(
      () => ({ code: 0, stderr: '' }),
      (e: { code: number; stderr: string }) => e,
    );
    expect(cli.code).toBe(1);
    expect(cli.stderr).toContain(`${file} cannot be read (the file is empty`);
    expect(statSync(file).size).toBe(0);
  });

  it('a missing store is refused while the directory names the store it held; deleting that file starts a new one on purpose', async () => {
    const { core } = await openCore(dir.path);
    await core.createTopic('orders');
    await core.close();
    const marker = join(dir.path, STORE_ID_FILE);
    const { storeId } = JSON.parse(readFileSync(marker, 'utf8')) as { storeId: string };
    for (const f of ['orderly.sqlite', 'orderly.sqlite-wal', 'orderly.sqlite-shm']) rmSync(join(dir.path, f), { force: true });
    expect(() => SqliteStore.open(dir.path)).toThrow(StoreIdentityError);
    expect(() => SqliteStore.open(dir.path)).toThrow(`held store ${storeId} (named in ${marker})`);
    expect(() => SqliteStore.open(dir.path)).toThrow(`to start a new, empty store here on purpose, delete ${marker}`);
    expect(existsSync(join(dir.path, 'orderly.sqlite'))).toBe(false);

    rmSync(marker);
    const fresh = SqliteStore.open(dir.path);
    expect(fresh.id).not.toBe(storeId);
    expect(await fresh.listTopics()).toEqual([]);
    await fresh.close();
    expect(JSON.parse(readFileSync(marker, 'utf8')).storeId).toBe(fresh.id);
  });

  it('another store put in its place is refused', async () => {
    const other = tempDir();
    try {
      for (const d of [dir.path, other.path]) await (await openCore(d)).core.close();
      copyFileSync(join(other.path, 'orderly.sqlite'), join(dir.path, 'orderly.sqlite'));
      expect(() => SqliteStore.open(dir.path)).toThrow(/is store .*, but this data directory holds store .*: the file was replaced/);
    } finally {
      other.remove();
    }
  });

  it('store id and subscription uids are kept across restarts; a subscription created again gets a new uid', async () => {
    let { core } = await openCore(dir.path);
    await core.createTopic('orders');
    await core.createSubscription('sub', { topic: 'orders' });
    const uid = core.identity('sub').uid;
    expect(core.identity('sub')).toEqual({ uid: expect.stringMatching(/^[0-9a-f-]{36}$/), adoptsNameKeyedProgress: false });
    await core.close();
    ({ core } = await openCore(dir.path));
    expect(core.identity('sub').uid).toBe(uid);
    await core.deleteSubscription('sub');
    await core.createSubscription('sub', { topic: 'orders' });
    expect(core.identity('sub').uid).not.toBe(uid);
    await core.close();
    const store = SqliteStore.open(dir.path);
    expect(JSON.parse(readFileSync(join(dir.path, STORE_ID_FILE), 'utf8')).storeId).toBe(store.id);
    await store.close();
  });
});

/** Turns a store into what the version before uids wrote (schema 1), as an upgrading user has it. */
function downgradeStore(storeDir: string): void {
  const db = new Database(join(storeDir, 'orderly.sqlite'));
  db.exec(`
    ALTER TABLE subscriptions DROP COLUMN uid;
    ALTER TABLE subscriptions DROP COLUMN adopts_name_keyed_progress;
    UPDATE meta SET v = '1' WHERE k = 'schema';
    DELETE FROM meta WHERE k = 'store_id';
  `);
  db.close();
  rmSync(join(storeDir, STORE_ID_FILE));
}

describe('upgrading a store made before uids', () => {
  let s3: TestS3;
  beforeAll(async () => {
    s3 = await startTestS3();
  });
  afterAll(async () => s3.close());

  it('DuckDB: progress kept under the name is adopted once — written messages are not written again, the rest are', async () => {
    let env = await openExport(dir.path);
    await queryDuckDb(env.duckdbPath, 'CREATE TABLE orders(data VARCHAR)');
    await env.core.createTopic('orders');
    await env.core.createSubscription('to-table', {
      topic: 'orders',
      enableMessageOrdering: true,
      bigqueryConfig: { table: 'p.main.orders' },
    });
    const messages = [
      ...['k0', 'k1'].flatMap((k) => Array.from({ length: 5 }, (_, i) => ({ data: `${k}-${i}`, orderingKey: k }))),
      { data: 'u-0' },
      { data: 'u-1' },
    ];
    const ids = await env.core.publish('orders', messages);
    await env.close();
    downgradeStore(join(dir.path, 'store'));
    // What the old writer had written (and recorded under the name) before it could ack: k0 1-3, k1 1-2, u-0.
    const name = 'projects/p/subscriptions/to-table';
    await queryDuckDb(
      env.duckdbPath,
      `INSERT INTO orders VALUES ('k0-0'), ('k0-1'), ('k0-2'), ('k1-0'), ('k1-1'), ('u-0');
       CREATE TABLE _orderly_export_progress(subscription VARCHAR, ordering_key VARCHAR, last_sequence BIGINT);
       INSERT INTO _orderly_export_progress VALUES ('${name}', 'k0', 2), ('${name}', 'k0', 3), ('${name}', 'k1', 2), ('projects/p/subscriptions/other', 'k0', 99);
       CREATE TABLE _orderly_export_ids(subscription VARCHAR, message_id VARCHAR, PRIMARY KEY(subscription, message_id));
       INSERT INTO _orderly_export_ids VALUES ('${name}', '${ids[10]}');`,
    );
    await closeDuckDb(env.duckdbPath);

    env = await openExport(dir.path);
    try {
      expect(env.core.identity('to-table').adoptsNameKeyedProgress).toBe(true);
      await env.exports.sync();
      await waitFor('export', () => env.core.metrics('to-table').backlogMessages === 0);
      const rows = (await queryDuckDb(env.duckdbPath, 'SELECT data FROM orders ORDER BY rowid')).map((r) => String(r.data));
      expect(rows.filter((d) => d.startsWith('k0'))).toEqual(['k0-0', 'k0-1', 'k0-2', 'k0-3', 'k0-4']);
      expect(rows.filter((d) => d.startsWith('k1'))).toEqual(['k1-0', 'k1-1', 'k1-2', 'k1-3', 'k1-4']);
      expect(rows.filter((d) => d.startsWith('u')).sort()).toEqual(['u-0', 'u-1']);
      // Adopted once: the name's rows moved under the uid; another subscription's stay; an empty table goes.
      expect(await queryDuckDb(env.duckdbPath, 'SELECT subscription, last_sequence FROM _orderly_export_progress')).toEqual([
        { subscription: 'projects/p/subscriptions/other', last_sequence: 99n },
      ]);
      expect(
        await queryDuckDb(
          env.duckdbPath,
          "SELECT count(*)::INT AS n FROM information_schema.tables WHERE table_name = '_orderly_export_ids'",
        ),
      ).toEqual([{ n: 0 }]);

      // Created again under the same name: nothing is adopted, everything new is written.
      await env.core.deleteSubscription('to-table');
      await env.core.createSubscription('to-table', {
        topic: 'orders',
        enableMessageOrdering: true,
        bigqueryConfig: { table: 'p.main.orders' },
      });
      expect(env.core.identity('to-table').adoptsNameKeyedProgress).toBe(false);
      await env.exports.sync();
      await env.core.publish('orders', messages);
      await waitFor('export again', () => env.core.metrics('to-table').backlogMessages === 0);
      expect(await queryDuckDb(env.duckdbPath, 'SELECT count(*)::INT AS n FROM orders')).toEqual([{ n: 24 }]);
    } finally {
      await env.close();
    }
  });

  it('object storage: the manifest kept under the folded name is adopted once — committed messages are not written again', async () => {
    const bucket = await s3.bucket();
    const config = { bucket, filenameDatetimeFormat: 'YYYY-MM-DDThh:mm:ssZ', textConfig: {} };
    let env = await openExport(dir.path, { objectStorage: s3.settings });
    await env.core.createTopic('events');
    await env.core.createSubscription('to-s3', { topic: 'events', enableMessageOrdering: true, cloudStorageConfig: config });
    await env.core.publish(
      'events',
      Array.from({ length: 5 }, (_, i) => ({ data: `k0-${i}`, orderingKey: 'k0' })),
    );
    await env.close();
    downgradeStore(join(dir.path, 'store'));
    // What the old writer had committed (under the folded name) before it could ack: k0 1-3.
    const legacyDir = join(dir.path, 'object-storage', 'projects_p_subscriptions_to-s3');
    mkdirSync(join(legacyDir, 'spill'), { recursive: true });
    writeFileSync(join(legacyDir, 'spill', '1.part'), 'stale');
    await s3.minio.putObject(bucket, 'old-object', Buffer.from('k0-0\nk0-1\nk0-2\n'));
    const legacy = new Manifest(join(legacyDir, 'manifest.jsonl'));
    await legacy.markPending('old-object');
    await legacy.commit({
      object: 'old-object',
      bucket,
      format: 'text',
      createdAt: new Date().toISOString(),
      committedAt: new Date().toISOString(),
      records: 3,
      bytes: 15,
      keys: { k0: { first: 1, last: 3, count: 3 } },
      unkeyed: [],
    });
    legacy.close();

    env = await openExport(dir.path, { objectStorage: s3.settings });
    const subscription = { name: 'projects/p/subscriptions/to-s3', uid: env.core.identity('to-s3').uid };
    try {
      await env.exports.sync();
      await waitFor('held', () => env.exports.runner('to-s3')!.stats.written + env.exports.runner('to-s3')!.outstanding >= 5);
      await env.exports.stop();
      expect(env.core.metrics('to-s3').backlogMessages).toBe(0);
    } finally {
      await env.close();
    }
    expect(existsSync(legacyDir)).toBe(false);
    const objects = await s3.list(bucket);
    expect(objects).toHaveLength(2);
    const lines = (await Promise.all(objects.map(async (o) => (await s3.get(bucket, o)).toString().trim().split('\n')))).flat();
    expect(lines.sort()).toEqual(['k0-0', 'k0-1', 'k0-2', 'k0-3', 'k0-4']);
    expect(committedObjects(manifestPath(dir.path, subscription))).toHaveLength(2);
    const report = await auditSubscription(subscription, parseObjectStorageConfig(config), {
      dataDir: dir.path,
      objectStorage: s3.settings,
    });
    expect(report).toMatchObject({ records: 5, missing: { count: 0 }, duplicates: { count: 0 }, objectErrors: { count: 0 } });
  });
});
