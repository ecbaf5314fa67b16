import { duckDbSettings, ROW_GROUP_SIZE } from '../../src/duckdb/database.js';

/**
 * DuckDB ran out of its memory limit writing the database file. A failed automatic checkpoint also
 * invalidates the database in that instance ("Detach and reattach the database to recover"): every later
 * statement fails, however much memory is free by then, so the writer closes the instance and the next
 * open attaches the file afresh (replaying its WAL).
 */
export class DuckDbMemoryError extends Error {
  constructor(file: string, table: string, cause: unknown) {
    const limit = duckDbSettings('tables').memory_limit;
    super(
      `DuckDB ran out of its memory limit (memory.duckdbTables: ${limit}) writing table ${table} in ${file}; the export ` +
        'reopens the database and retries. If this repeats, raise memory.duckdbTables: a checkpoint holds the ' +
        `table's last row group (up to ${ROW_GROUP_SIZE} rows) in memory, so messages over ~10 KB need more, and a ` +
        `PRIMARY KEY's index stays in memory (~45 bytes a key): ${firstLine(cause)}`,
    );
    this.name = 'DuckDbMemoryError';
  }
}

/** DuckDB's out-of-memory errors, and the invalidated database a failed checkpoint leaves. */
export function isDuckDbMemoryError(e: unknown): boolean {
  const message = (e as Error).message ?? String(e);
  return /Out of Memory Error|failed to pin block|could not allocate block|has been invalidated/i.test(message);
}

function firstLine(e: unknown): string {
  return ((e as Error).message ?? String(e)).split('\n')[0]!;
}
