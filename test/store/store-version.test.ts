import Database from 'better-sqlite3';
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { queryDuckDb } from '../../src/duckdb/database.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { StoreVersionError } from '../../src/store/store.js';
import { orderlyBin } from '../helpers/cli.js';
import { openCore } from '../helpers/core.js';
import { openExport } from '../helpers/export.js';
import { waitFor } from '../helpers/wait-for.js';
import { tempDirPerTest } from '../helpers/temp-dir-per-test.js';

const dir = tempDirPerTest();

function storeSchema(file: string): string {
  const db = new Database(file, { readonly: true });
  try {
    return db.prepare("SELECT v FROM meta WHERE k = 'schema'").pluck().get() as string;
  } finally {
    db.close();
  }
}

describe('a data directory is read by the Orderly that wrote it or a newer one', () => {
  it('once a DuckDB export kept its ranges there, an Orderly of store schema 4 refuses the directory rather than misread them', async () => {
    // An Orderly of schema 4 (before the ranges) appended four columns to the progress log, which now has
    // five: every batch failed with DuckDB's "Call to EndRow before all columns have been appended to!",
    // retried for ever. Its only check of a data directory is the store's schema: it refuses any but 4.
    const env = await openExport(dir.path);
    try {
      await queryDuckDb(env.duckdbPath, 'CREATE TABLE orders(data VARCHAR)');
      await env.core.createTopic('orders');
      await env.core.createSubscription('to-table', {
        topic: 'orders',
        enableMessageOrdering: true,
        bigqueryConfig: { table: 'p.main.orders' },
      });
      await env.exports.sync();
      await env.core.publish('orders', [{ data: 'k-1', orderingKey: 'k' }]);
      await waitFor('export', () => env.core.metrics('to-table').backlogMessages === 0);
    } finally {
      await env.close();
    }
    const progress = await queryDuckDb(
      env.duckdbPath,
      "SELECT count(*)::INT AS n FROM information_schema.columns WHERE table_name = '_orderly_export_key_progress'",
    );
    expect(progress).toEqual([{ n: 5 }]);
    expect(storeSchema(join(dir.path, 'store', 'orderly.sqlite'))).not.toBe('4');
  });

  it('a store of a newer schema is refused naming both versions, and left as it is; the CLI exits 1 saying so', async () => {
    await (await openCore(dir.path)).core.close();
    const file = join(dir.path, 'orderly.sqlite');
    const db = new Database(file);
    db.prepare("UPDATE meta SET v = '99' WHERE k = 'schema'").run();
    db.close();
    const before = readFileSync(file);

    expect(() => SqliteStore.open(dir.path)).toThrow(StoreVersionError);
    expect(() => SqliteStore.open(dir.path)).toThrow(`the Orderly store at ${file} was written by a newer Orderly (store schema 99;`);
    writeFileSync(join(dir.path, 'job.yaml'), `dataDir: ${dir.path}\n`);
    const cli = await promisify(execFile)(process.execPath, [orderlyBin, 'status', join(dir.path, 'job.yaml')], { encoding: 'utf8' }).then(
      () => ({ code: 0, stderr: '' }),
      (e: { code: number; stderr: string }) => e,
    );
    expect(cli.code).toBe(1);
    expect(cli.stderr).toContain('was written by a newer Orderly (store schema 99; this Orderly reads schema');
    expect(readFileSync(file).equals(before)).toBe(true);
  });

  it('a command that exports nothing (status, a read-only query) leaves a store of schema 4 at 4, so its Orderly still opens it', async () => {
    await (await openCore(dir.path)).core.close();
    const file = join(dir.path, 'orderly.sqlite');
    const db = new Database(file);
    db.prepare("UPDATE meta SET v = '4' WHERE k = 'schema'").run();
    db.close();
    const job = join(dir.path, 'job.yaml');
    writeFileSync(job, `dataDir: ${dir.path}\ntopics: [{ name: orders }]\nsubscriptions: [{ name: work, topic: orders }]\n`);
    const orderly = promisify(execFile);
    await orderly(process.execPath, [orderlyBin, 'status', job], { encoding: 'utf8' });
    await orderly(process.execPath, [orderlyBin, 'query', job, 'SELECT 1'], { encoding: 'utf8' });
    expect(storeSchema(file)).toBe('4');

    // The first process that exports marks it.
    await (await openCore(dir.path)).core.close();
    expect(storeSchema(file)).toBe('5');
  });
});
