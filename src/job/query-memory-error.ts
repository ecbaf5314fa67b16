import { OrderlyError } from '../core/errors.js';
import { duckDbSettings, isDuckDbMemoryError, type DuckDbUse } from '../duckdb/limits.js';

/**
 * A query that ran out of DuckDB's memory limit, said as the job's setting that decides and what the
 * query can change. DuckDB's own message advises `SET memory_limit` and `SET threads`, which last only for
 * the query, and not what ran out: `COPY (SELECT * FROM <export view>) TO 'x.parquet'` holds a whole row
 * group of the file it writes (122,880 rows by default) in memory, 100,000 rows of 1 KB more than 96 MiB.
 */
export function queryMemoryError(e: unknown, use: DuckDbUse): unknown {
  if (!isDuckDbMemoryError(e)) return e;
  const setting =
    use === 'other' ? 'memory.duckdb' : 'memory.duckdbTables (memory.duckdb in a process running no export, such as orderly query)';
  const duckDb = ((e as Error).message ?? String(e)).split('\n')[0];
  return new OrderlyError(
    'RESOURCE_EXHAUSTED',
    `the query ran out of DuckDB's memory limit (${duckDbSettings(use).memory_limit}, the job file's ${setting}): raise it, or make ` +
      'the query hold less at once; a COPY ... TO a Parquet file holds a whole row group in memory (122,880 rows unless told): ' +
      `write smaller ones with (FORMAT parquet, ROW_GROUP_SIZE 16384) (DuckDB: ${duckDb})`,
  );
}
