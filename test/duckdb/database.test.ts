import { DuckDBInstance } from '@duckdb/node-api';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { closeDuckDb, connectDuckDb, queryDuckDb } from '../../src/duckdb/database.js';
import { tempDir } from '../helpers/temp-dir.js';

let dir: ReturnType<typeof tempDir>;
const opened: string[] = [];
beforeEach(() => {
  dir = tempDir('orderly-duckdb-');
});
afterEach(async () => {
  for (const path of opened.splice(0)) await closeDuckDb(path);
  dir.remove();
});

function database(name: string): string {
  const path = join(dir.path, name);
  opened.push(path);
  return path;
}

/** Reads a file the way `orderly query` does: its own read-only instance, the file opened directly. */
async function readDirectly(path: string, sql: string): Promise<unknown[][]> {
  const instance = await DuckDBInstance.create(path, { access_mode: 'READ_ONLY' });
  try {
    const connection = await instance.connect();
    try {
      return (await connection.runAndReadAll(sql)).getRows();
    } finally {
      connection.closeSync();
    }
  } finally {
    instance.closeSync();
  }
}

describe('a DuckDB database file Orderly opens', () => {
  it('writes row groups of 16,384 rows (a checkpoint recompresses at most that much of the last one)', async () => {
    const path = database('orders.duckdb');
    await queryDuckDb(path, 'CREATE TABLE t AS SELECT range AS x FROM range(20000)');
    await queryDuckDb(path, 'CHECKPOINT');
    const [groups] = await queryDuckDb(path, "SELECT count(DISTINCT row_group_id)::INT AS n FROM pragma_storage_info('t')");
    expect(groups).toEqual({ n: 2 });
  });

  it('is the database of every connection, under the name DuckDB gives the file, spilling next to it', async () => {
    const path = database('orders.duckdb');
    const connection = await connectDuckDb(path);
    try {
      await connection.run('CREATE TABLE t(x INTEGER)');
      const settings = await connection.runAndReadAll("SELECT current_database(), current_setting('temp_directory')");
      expect(settings.getRows()).toEqual([['orders', `${path}.tmp`]]);
      // A query may name the catalog, as it could when the file was opened directly.
      expect((await connection.runAndReadAll('SELECT count(*)::INT FROM orders.main.t')).getRows()).toEqual([[0]]);
    } finally {
      connection.closeSync();
    }
    // A file named like DuckDB's in-memory database gets a name of its own.
    expect(await queryDuckDb(database('memory.duckdb'), 'SELECT current_database() AS name')).toEqual([{ name: 'memory_db' }]);
  });

  it('opens a file written by an instance that opened it directly, and what it writes reads back the same way', async () => {
    const path = database('old.duckdb');
    const old = await DuckDBInstance.create(path);
    const connection = await old.connect();
    await connection.run('CREATE TABLE t AS SELECT range AS x FROM range(150000)');
    connection.closeSync();
    old.closeSync();

    await queryDuckDb(path, 'INSERT INTO t SELECT range + 150000 FROM range(50000)');
    await closeDuckDb(path);
    expect(await readDirectly(path, 'SELECT count(*)::INT, sum(x)::BIGINT FROM t')).toEqual([[200000, 19999900000n]]);
  });
});
