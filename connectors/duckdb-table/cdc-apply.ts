import { VARCHAR, type DuckDBConnection, type DuckDBType, type DuckDBValue } from '@duckdb/node-api';
import { quoteIdent, quoteString } from '../../src/duckdb/sql.js';
import { appendCell } from './append-cell.js';
import { compareChangeSequence, DEFAULT, type Cell, type Column, type Row, type RowMapper } from './row-mapper.js';

/** The table's last applied _CHANGE_SEQUENCE_NUMBER per primary key, for every CDC table of the database. */
const CDC_VERSIONS = '_orderly_cdc_versions';
/** A connection-local scratch table: changes are staged here and applied in one statement. */
const STAGE = '_orderly_stage';

export type Change = Exclude<Row, { kind: 'append' }>;

/**
 * BigQuery's CDC writes (`_CHANGE_TYPE` UPSERT/DELETE against the primary key) for one table, skipping
 * changes older than the row's last one by `_CHANGE_SEQUENCE_NUMBER`. The versions applied are kept in
 * the database with the rows (the same transaction), and read from there in the transaction that
 * applies the next changes of those keys: another subscription writing the same table may have applied
 * a newer one meanwhile (two transactions that both do conflict, and the later is retried).
 */
export class CdcApplier {
  constructor(
    /** `schema.table`, as the versions table names it. */
    private readonly tableKey: string,
    /** The quoted target table. */
    private readonly target: string,
  ) {}

  static async create(connection: DuckDBConnection): Promise<void> {
    await connection.run(
      `CREATE TABLE IF NOT EXISTS ${CDC_VERSIONS}(table_name VARCHAR, pk VARCHAR, change_sequence VARCHAR, PRIMARY KEY(table_name, pk))`,
    );
  }

  /** Inside the transaction: the versions the table holds for `keys`. */
  private async storedVersions(connection: DuckDBConnection, keys: string[]): Promise<Map<string, string>> {
    if (!keys.length) return new Map();
    const rows = await connection.runAndReadAll(
      `SELECT pk, change_sequence FROM ${CDC_VERSIONS} WHERE table_name = $1 AND pk IN (${keys.map(quoteString).join(', ')})`,
      [this.tableKey],
    );
    return new Map(rows.getRows().map(([k, v]) => [String(k), String(v)]));
  }

  /**
   * Applies a run of changes in one statement per kind (DuckDB spends milliseconds per statement) with the
   * effect of applying them one by one: per key, a DELETE anywhere in the run deletes the row first, and
   * the UPSERTs after the last DELETE merge into one (an UPSERT sets the columns its message has; DuckDB's
   * INSERT OR REPLACE leaves the others as they are, or at their default for a new row). The versions of
   * every change applied go to `applied` (this transaction's; see `saveVersions`). Returns how many
   * changes were applied: those older than their row's last one are skipped.
   */
  async apply(connection: DuckDBConnection, mapper: RowMapper, changes: Change[], applied: Map<string, string>): Promise<number> {
    const perKey = new Map<string, { deleteKey?: DuckDBValue[]; cells?: Cell[] }>();
    const stored = await this.storedVersions(connection, [
      ...new Set(changes.flatMap((c) => (c.changeSequence !== undefined && !applied.has(c.pk) ? [c.pk] : []))),
    ]);
    let count = 0;
    for (const change of changes) {
      if (change.changeSequence !== undefined) {
        // Versions of this transaction first, then the stored ones.
        const last = applied.get(change.pk) ?? stored.get(change.pk);
        if (last !== undefined && compareChangeSequence(change.changeSequence, last) <= 0) continue;
        applied.set(change.pk, change.changeSequence);
      }
      count++;
      const state = perKey.get(change.pk) ?? {};
      perKey.set(change.pk, state);
      if (change.kind === 'delete') {
        state.deleteKey = change.keyCells;
        state.cells = undefined;
      } else {
        state.cells = state.cells ? change.cells.map((cell, i) => (cell === DEFAULT ? state.cells![i]! : cell)) : change.cells;
      }
    }
    const target = this.target;
    const deletes = [...perKey.values()].flatMap((s) => (s.deleteKey ? [s.deleteKey] : []));
    if (deletes.length) {
      const keys = mapper.primaryKey.map((k) => mapper.columns.find((c) => c.name === k)!);
      const on = keys.map((k) => `${target}.${quoteIdent(k.name)} = ${STAGE}.${quoteIdent(k.name)}`).join(' AND ');
      await staged(connection, target, keys, deletes, () => `DELETE FROM ${target} USING ${STAGE} WHERE ${on}`);
    }
    // One statement per set of columns present.
    const upserts = new Map<string, { columns: Column[]; rows: DuckDBValue[][] }>();
    for (const { cells } of perKey.values()) {
      if (!cells) continue;
      const used = mapper.columns.flatMap((column, i) => (cells[i] === DEFAULT ? [] : [{ column, value: cells[i] as DuckDBValue }]));
      const set = used.map((u) => u.column.name).join('\u0000');
      const group = upserts.get(set) ?? { columns: used.map((u) => u.column), rows: [] };
      group.rows.push(used.map((u) => u.value));
      upserts.set(set, group);
    }
    for (const { columns, rows } of upserts.values()) {
      await staged(connection, target, columns, rows, (cols) => `INSERT OR REPLACE INTO ${target} (${cols}) SELECT ${cols} FROM ${STAGE}`);
    }
    return count;
  }

  /** Inside the transaction: stores the versions `apply` recorded. */
  async saveVersions(connection: DuckDBConnection, applied: Map<string, string>): Promise<void> {
    if (!applied.size) return;
    const rows = [...applied].map(([pk, seq]) => [this.tableKey, pk, seq]);
    const columns = ['table_name', 'pk', 'change_sequence'].map((name) => ({ name, type: VARCHAR }));
    await staged(
      connection,
      CDC_VERSIONS,
      columns,
      rows,
      (cols) => `INSERT OR REPLACE INTO ${CDC_VERSIONS} (${cols}) SELECT ${cols} FROM ${STAGE}`,
    );
  }
}

/** Appends `rows` to a scratch table shaped like `columns` of `table`, runs `sql(columnList)`, drops it. */
async function staged(
  connection: DuckDBConnection,
  table: string,
  columns: { name: string; type: DuckDBType }[],
  rows: Cell[][],
  sql: (columnList: string) => string,
): Promise<void> {
  const list = columns.map((c) => quoteIdent(c.name)).join(', ');
  await connection.run(`CREATE OR REPLACE TEMP TABLE ${STAGE} AS SELECT ${list} FROM ${table} LIMIT 0`);
  try {
    const appender = await connection.createAppender(STAGE, 'main', 'temp');
    for (const row of rows) {
      row.forEach((cell, i) => appendCell(appender, cell, columns[i]!.type));
      appender.endRow();
    }
    appender.closeSync();
    await connection.run(sql(list));
  } finally {
    // After a failed statement the transaction is aborted and this fails too; the rollback drops it.
    await connection.run(`DROP TABLE IF EXISTS temp.main.${STAGE}`).catch(() => undefined);
  }
}
