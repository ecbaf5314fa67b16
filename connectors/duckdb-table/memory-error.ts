import { DuckDBTypeId, type DuckDBType } from '@duckdb/node-api';
import { duckDbSettings, ROW_GROUP_SIZE } from '../../src/duckdb/database.js';

/**
 * DuckDB ran out of its memory limit writing the database file. A failed automatic checkpoint also
 * invalidates the database in that instance ("Detach and reattach the database to recover"): every later
 * statement fails, however much memory is free by then, so the writer closes the instance and the next
 * open attaches the file afresh (replaying its WAL).
 */
export class DuckDbMemoryError extends Error {
  /** `columns`: the table's column types, when known, to say what its width alone needs. */
  constructor(file: string, table: string, cause: unknown, columns?: readonly DuckDBType[]) {
    const limit = duckDbSettings('tables').memory_limit;
    super(
      `DuckDB ran out of its memory limit (memory.duckdbTables: ${limit}) writing table ${table} in ${file}; the export ` +
        'reopens the database and retries. If this repeats, raise memory.duckdbTables: a checkpoint holds the ' +
        `table's last row group (up to ${ROW_GROUP_SIZE} rows) in memory, so messages over ~10 KB need more, ` +
        `${columns ? `${widthNeed(columns)}, ` : ''}and a PRIMARY KEY's index stays in memory (~45 bytes a key): ${firstLine(cause)}`,
    );
    this.name = 'DuckDbMemoryError';
  }
}

/**
 * What a table's width needs whatever its rows' size: DuckDB writes each stored column (a STRUCT's fields
 * and a LIST's elements are columns of their own) in 256 KiB blocks, and at a row group's end holds a block
 * of each for two groups. Measured: 100 INTEGER columns ran out at 32 MiB and ran at 64 MiB, 200 at 64 MiB
 * and 128 MiB; a 200-column table of 2.6 KB messages stopped for good at the default, its reason naming
 * only messages over ~10 KB.
 */
function widthNeed(columns: readonly DuckDBType[]): string {
  const stored = columns.reduce((n, t) => n + storedColumns(t), 0);
  return `its ${stored} stored columns need about ${Math.ceil(stored / 2)} MiB by themselves (256 KiB blocks of each, for two row groups)`;
}

function storedColumns(type: DuckDBType): number {
  switch (type.typeId) {
    case DuckDBTypeId.STRUCT:
      return type.entryTypes.reduce((n, t) => n + storedColumns(t), 0);
    case DuckDBTypeId.LIST:
    case DuckDBTypeId.ARRAY:
      return 1 + storedColumns(type.valueType);
    case DuckDBTypeId.MAP:
      return 1 + storedColumns(type.keyType) + storedColumns(type.valueType);
    default:
      return 1;
  }
}

function firstLine(e: unknown): string {
  return ((e as Error).message ?? String(e)).split('\n')[0]!;
}
