import type { DuckDBConnection, DuckDBValue } from '@duckdb/node-api';
import { quoteIdent } from '../../src/duckdb/sql.js';
import { DEFAULT, type Cell } from './row-mapper.js';

/**
 * A column whose default the appender cannot fill (`id UUID DEFAULT gen_random_uuid()`, `n BIGINT DEFAULT
 * nextval('seq')`): DuckDB's appendDefault refuses a default that is not a constant ("not a foldable
 * default expressions"), which failed every write of a message leaving such a column out, stalling the
 * export. Its default is evaluated by a query instead, once per batch for all the rows that need it.
 */
export interface ComputedDefault {
  index: number;
  /** The default's SQL, as the table's definition gives it (the user's DDL, never a message's text). */
  sql: string;
}

/** The columns among `defaults` (position and SQL of each column with a default) that the appender cannot fill. */
export async function computedDefaults(
  connection: DuckDBConnection,
  { catalog, schema, table }: { catalog: string; schema: string; table: string },
  defaults: ComputedDefault[],
): Promise<ComputedDefault[]> {
  const computed: ComputedDefault[] = [];
  for (const d of defaults) {
    // Asked of the appender itself (it decides at appendDefault, before any row is written): DuckDB's
    // notion of a foldable expression is not one to copy.
    const appender = await connection.createAppender(table, schema, catalog);
    try {
      for (let i = 0; i < d.index; i++) appender.appendNull();
      appender.appendDefault();
    } catch {
      computed.push(d);
    } finally {
      appender.clear();
      appender.closeSync();
    }
  }
  return computed;
}

/** Inside the batch's transaction: fills each computed default a row leaves out, by one query per column. */
export async function fillComputedDefaults(connection: DuckDBConnection, computed: ComputedDefault[], rows: Cell[][]): Promise<void> {
  for (const { index, sql } of computed) {
    const missing = rows.filter((cells) => cells[index] === DEFAULT);
    if (!missing.length) continue;
    const values = (
      await connection.runAndReadAll(`SELECT ${sql} AS ${quoteIdent('value')} FROM range(${missing.length})`)
    ).getColumns()[0]!;
    missing.forEach((cells, i) => (cells[index] = values[i] as DuckDBValue));
  }
}
