import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { closeDuckDb, openDuckDb, queryDuckDb, setDuckDbLimits } from '../../src/duckdb/database.js';
import { tempDirPerTest } from '../helpers/temp-dir-per-test.js';

const dir = tempDirPerTest();

/** The process's threads (Linux): DuckDB's workers among them while an instance runs. */
const threads = () => readdirSync('/proc/self/task').length;
const walBytes = (path: string) => (existsSync(`${path}.wal`) ? statSync(`${path}.wal`).size : 0);

/**
 * A table export's database closed at the job's stop: `closeSync` checkpointed its WAL on the event loop
 * (0.8-0.9 s for a 39 MB WAL, 1.6 s with Orderly's allocator setting) and joined DuckDB's worker threads.
 * Both are done before it now, as queries off the loop, and closeSync finds nothing left to do.
 */
it('checkpoints the WAL and stops the worker threads before closeSync', async () => {
  // memory.duckdbTableThreads above its default of 1: worker threads for closeSync to join.
  setDuckDbLimits({ tableThreads: 4 });
  const path = join(dir.path, 'orders.duckdb');
  await queryDuckDb(path, 'CREATE TABLE orders(id BIGINT, data VARCHAR)');
  // Small commits, as an export's: each goes to the WAL (a large insert writes row groups to the file).
  for (let i = 0; i < 20; i++)
    await queryDuckDb(path, `INSERT INTO orders SELECT range, repeat('x', 500) FROM range(${i * 100}, ${(i + 1) * 100})`);
  expect(walBytes(path)).toBeGreaterThan(500_000);
  const instance = await openDuckDb(path);
  const closeSync = instance.closeSync.bind(instance);
  let atClose: { wal: number; threads: number } | undefined;
  instance.closeSync = () => {
    atClose = { wal: walBytes(path), threads: threads() };
    closeSync();
  };
  await closeDuckDb(path);
  expect(atClose).toEqual({ wal: 0, threads: threads() });
  // Every row is in the file.
  expect(await queryDuckDb(path, 'SELECT count(*)::INT AS n FROM orders')).toEqual([{ n: 2000 }]);
  await closeDuckDb(path);
});
