import {
  DuckDBBlobValue,
  DuckDBTimestampValue,
  DuckDBTypeId,
  timestampValue,
  VARCHAR,
  type DuckDBAppender,
  type DuckDBConnection,
  type DuckDBInstance,
  type DuckDBType,
  type DuckDBValue,
} from '@duckdb/node-api';
import { closeSync, openSync, readSync, statSync } from 'node:fs';
import { SinkStateError, emptyResult, type Connector, type ConnectorContext, type ExportMessage, type WriteResult } from '../../src/connector/connector.js';
import { discardDuckDb, duckDbFile, openDuckDb } from '../../src/duckdb/database.js';
import { quoteIdent, quoteString } from '../../src/duckdb/sql.js';
import type { DuckDbTableConfig } from './config.js';
import { ConversionError } from './json-to-column.js';
import { compareChangeSequence, DEFAULT, RowMapper, SchemaMismatch, type Cell, type Column, type Row } from './row-mapper.js';

/**
 * Append-only: one row per key per committed batch; the latest per key wins (indexed upserts are slow).
 * Keyed by the subscription's uid (the name is there for people reading it).
 */
const PROGRESS = '_orderly_export_key_progress';
/** Rewrite the progress log when it holds this many rows per distinct key. */
const PROGRESS_COMPACT_RATIO = 8;
const WRITTEN_IDS = '_orderly_export_written_ids';
/** Before subscriptions had uids, progress was kept under their names here; adopted once, then dropped. */
const NAME_KEYED_PROGRESS = '_orderly_export_progress';
const NAME_KEYED_IDS = '_orderly_export_ids';
const CDC_VERSIONS = '_orderly_cdc_versions';
/** A connection-local scratch table: CDC changes are staged here and applied in one statement. */
const STAGE = '_orderly_stage';

type Change = Exclude<Row, { kind: 'append' }>;

interface Pending {
  em: ExportMessage;
  row: Row;
}

/**
 * The database file is not the one the writer opened any more (deleted, replaced, truncated, header
 * overwritten). DuckDB does not notice while it runs, so rows committed now would be acked into a file
 * that is gone: the writer stops reporting anything written until the file is whole again.
 */
export class DuckDbFileError extends Error {
  constructor(file: string, problem: string) {
    super(
      `DuckDB database ${file} ${problem}; nothing more is acked until it is whole again. Restore it from a backup (or move it ` +
        'aside to start a new file), see docs/connectors.md "When the DuckDB file is damaged"',
    );
    this.name = 'DuckDbFileError';
  }
}

/**
 * The DuckDB table writer (BigQuery-subscription style). Appends rows with the DuckDB appender in
 * per-key order. Effectively once: the last written sequence per (subscription uid, ordering key) — and
 * the message ids of unkeyed or unordered messages — are stored in the same transaction as the rows, so a
 * redelivery after a crash is recognised and skipped instead of written twice. Keyed by the uid, a
 * subscription created again under the same name starts with nothing written.
 */
export class DuckDbTableWriter implements Connector {
  private connection?: DuckDBConnection;
  private mapper?: RowMapper;
  readonly counters = { rowsAppended: 0 };
  private readonly lastSequence = new Map<string, number>();
  private progressRows = 0;
  /** The table's last applied _CHANGE_SEQUENCE_NUMBER per primary key (CDC), loaded once. */
  private cdcVersions?: Map<string, string>;
  private readonly target: string;
  /** The database instance the writer connected through, and the file (device, inode) it opened. */
  private instance?: DuckDBInstance;
  private file?: { dev: number; ino: number };

  constructor(
    private readonly config: DuckDbTableConfig,
    private readonly context: ConnectorContext,
    private readonly databasePath: string,
    private readonly now: () => number = Date.now,
  ) {
    this.target = `${quoteIdent(config.schema)}.${quoteIdent(config.tableName)}`;
    this.tableKey = `${config.schema}.${config.tableName}`;
  }

  private readonly tableKey: string;

  async open(): Promise<void> {
    if (!this.connection) {
      this.instance = await openDuckDb(this.databasePath);
      this.file = duckDbFile(this.instance);
      const connection = await this.instance.connect();
      try {
        await this.checkFile();
        await connection.run(`
          CREATE TABLE IF NOT EXISTS ${PROGRESS}(subscription_uid VARCHAR, subscription VARCHAR, ordering_key VARCHAR, last_sequence BIGINT);
          CREATE TABLE IF NOT EXISTS ${WRITTEN_IDS}(
            subscription_uid VARCHAR, subscription VARCHAR, message_id VARCHAR, publish_time TIMESTAMP, PRIMARY KEY(subscription_uid, message_id));
          CREATE TABLE IF NOT EXISTS ${CDC_VERSIONS}(table_name VARCHAR, pk VARCHAR, change_sequence VARCHAR, PRIMARY KEY(table_name, pk));
        `);
        if (this.context.identity.adoptsNameKeyedProgress) await this.adoptNameKeyedProgress(connection);
        const progress = await connection.runAndReadAll(
          `SELECT ordering_key, max(last_sequence), count(*) FROM ${PROGRESS} WHERE subscription_uid = $1 GROUP BY ordering_key`,
          [this.context.identity.uid],
        );
        for (const [key, seq, rows] of progress.getRows()) {
          this.lastSequence.set(String(key), Number(seq));
          this.progressRows += Number(rows);
        }
      } catch (e) {
        connection.closeSync();
        throw e;
      }
      this.connection = connection;
    }
    await this.loadTable();
  }

  /**
   * Progress kept under this subscription's name (before subscriptions had uids) is its own: moved under
   * its uid in one transaction, so it is adopted exactly once. A legacy table left empty is dropped.
   */
  private async adoptNameKeyedProgress(connection: DuckDBConnection): Promise<void> {
    const present = await connection.runAndReadAll(
      'SELECT table_name FROM information_schema.tables WHERE table_catalog = current_database() AND table_schema = current_schema() AND table_name IN ($1, $2)',
      [NAME_KEYED_PROGRESS, NAME_KEYED_IDS],
    );
    const legacy = new Set(present.getRows().map(([name]) => String(name)));
    if (!legacy.size) return;
    const { subscription, identity } = this.context;
    await connection.run('BEGIN TRANSACTION');
    try {
      const params = [identity.uid, subscription];
      if (legacy.has(NAME_KEYED_PROGRESS)) {
        await connection.run(
          `INSERT INTO ${PROGRESS} SELECT $1, subscription, ordering_key, last_sequence FROM ${NAME_KEYED_PROGRESS} WHERE subscription = $2`,
          params,
        );
        await connection.run(`DELETE FROM ${NAME_KEYED_PROGRESS} WHERE subscription = $1`, [subscription]);
      }
      if (legacy.has(NAME_KEYED_IDS)) {
        await connection.run(`ALTER TABLE ${NAME_KEYED_IDS} ADD COLUMN IF NOT EXISTS publish_time TIMESTAMP`);
        await connection.run(`INSERT INTO ${WRITTEN_IDS} SELECT $1, subscription, message_id, publish_time FROM ${NAME_KEYED_IDS} WHERE subscription = $2`, params);
        await connection.run(`DELETE FROM ${NAME_KEYED_IDS} WHERE subscription = $1`, [subscription]);
      }
      await connection.run('COMMIT');
    } catch (e) {
      await connection.run('ROLLBACK').catch(() => undefined);
      throw e;
    }
    for (const table of legacy) {
      const left = await connection.runAndReadAll(`SELECT count(*) FROM ${table}`);
      if (Number(left.getRows()[0]![0]) === 0) await connection.run(`DROP TABLE ${table}`);
    }
  }

  /**
   * Checks that the database path still names the file the instance opened, and that it starts with a
   * DuckDB header. On a problem the instance is closed in this process, so the next open reads the file
   * afresh, and DuckDbFileError is thrown.
   */
  private async checkFile(): Promise<void> {
    const problem = fileProblem(this.databasePath, this.file);
    if (problem === undefined) return;
    this.connection?.closeSync();
    this.connection = undefined;
    this.mapper = undefined;
    if (this.instance) await discardDuckDb(this.databasePath, this.instance);
    throw new DuckDbFileError(this.databasePath, problem);
  }

  /** Reads the target table's columns and primary key; the sink is unusable without a fitting table. */
  private async loadTable(): Promise<RowMapper> {
    const connection = this.connection!;
    const { schema, tableName, table } = this.config;
    const info = await connection.runAndReadAll(
      'SELECT column_name, is_nullable, column_default FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position',
      [schema, tableName],
    );
    const rows = info.getRows();
    if (!rows.length) {
      throw new SinkStateError('NOT_FOUND', `table ${table} (DuckDB ${this.target} in ${this.databasePath}) does not exist`);
    }
    const appender = await connection.createAppender(tableName, schema);
    const columns: Column[] = rows.map(([name, nullable, dflt], i) => ({
      name: String(name),
      type: appender.columnType(i),
      nullable: nullable === 'YES',
      hasDefault: dflt !== null,
    }));
    appender.closeSync();
    const pk = await connection.runAndReadAll(
      "SELECT constraint_column_names FROM duckdb_constraints() WHERE schema_name = $1 AND table_name = $2 AND constraint_type = 'PRIMARY KEY'",
      [schema, tableName],
    );
    const pkColumns = (pk.getRowObjectsJson()[0]?.constraint_column_names as string[] | undefined) ?? [];
    const versions = await connection.runAndReadAll(`SELECT pk, change_sequence FROM ${CDC_VERSIONS} WHERE table_name = $1`, [this.tableKey]);
    this.cdcVersions = new Map(versions.getRows().map(([k, v]) => [String(k), String(v)]));
    try {
      this.mapper = new RowMapper(columns, pkColumns, this.config, this.context.subscription, () => this.context.topicSchema?.());
    } catch (e) {
      if (e instanceof SchemaMismatch) throw new SinkStateError('SCHEMA_MISMATCH', e.message);
      throw e;
    }
    return this.mapper;
  }

  private bySequence(em: ExportMessage): boolean {
    return this.context.spec.enableMessageOrdering && em.message.orderingKey !== '';
  }

  async write(batch: ExportMessage[]): Promise<WriteResult> {
    const mapper = this.mapper ?? (await this.loadTable());
    const result = emptyResult();
    const blocked = new Set<string>();
    const seen = await this.alreadyWrittenIds(batch.filter((em) => !this.bySequence(em)).map((em) => em.message.messageId));
    const pending: Pending[] = [];
    for (const em of batch) {
      const key = em.message.orderingKey;
      const ordered = this.bySequence(em);
      if (ordered && blocked.has(key)) {
        result.deferred.push(em.id);
      } else if (ordered ? em.message.sequence <= (this.lastSequence.get(key) ?? 0) : seen.has(em.message.messageId)) {
        result.written.push(em.id); // a redelivery of what is already in the table
      } else {
        try {
          pending.push({ em, row: mapper.map(em) });
        } catch (e) {
          if (e instanceof SchemaMismatch) throw new SinkStateError('SCHEMA_MISMATCH', e.message);
          if (!(e instanceof ConversionError)) throw e;
          result.failed.push({ id: em.id, error: e.message, retryable: false });
          if (ordered) blocked.add(key);
        }
      }
    }
    // Found already written means found in the file: not in one that was deleted or truncated since.
    await this.checkFile();
    if (!pending.length) return result;
    try {
      await this.commit(pending);
      result.written.push(...pending.map((p) => p.em.id));
    } catch (e) {
      this.rethrowIfSinkGone(e);
      if (!isDataError(e)) throw e;
      // A row the table refused (constraint, cast): find it by writing one row per transaction, so only
      // the bad message fails and its key stops there.
      await this.commitOneByOne(pending, blocked, result);
    }
    await this.checkFile();
    return result;
  }

  private async commitOneByOne(pending: Pending[], blocked: Set<string>, result: WriteResult): Promise<void> {
    for (const p of pending) {
      const ordered = this.bySequence(p.em);
      if (ordered && blocked.has(p.em.message.orderingKey)) {
        result.deferred.push(p.em.id);
        continue;
      }
      try {
        await this.commit([p]);
        result.written.push(p.em.id);
      } catch (e) {
        this.rethrowIfSinkGone(e);
        if (!isDataError(e)) throw e;
        result.failed.push({ id: p.em.id, error: `table ${this.config.table} refused the row: ${(e as Error).message}`, retryable: false });
        if (ordered) blocked.add(p.em.message.orderingKey);
      }
    }
  }

  private rethrowIfSinkGone(e: unknown): void {
    const message = (e as Error).message ?? String(e);
    if (/Table with name .* does not exist|Catalog Error/i.test(message)) {
      this.mapper = undefined;
      throw new SinkStateError('NOT_FOUND', `table ${this.config.table} is gone: ${message}`);
    }
    if (/Binder Error|Conversion Error.*column|columns but \d+ values/i.test(message) && /column/i.test(message)) {
      this.mapper = undefined;
      throw new SinkStateError('SCHEMA_MISMATCH', `table ${this.config.table} changed: ${message}`);
    }
  }

  /** Rows, progress markers and written ids in one transaction. */
  private async commit(pending: Pending[]): Promise<void> {
    const connection = this.connection!;
    const progress = new Map<string, number>();
    const ids: { id: string; publishTime: Date }[] = [];
    for (const { em } of pending) {
      if (this.bySequence(em)) progress.set(em.message.orderingKey, Math.max(progress.get(em.message.orderingKey) ?? 0, em.message.sequence));
      else ids.push({ id: em.message.messageId, publishTime: em.message.publishTime });
    }
    await connection.run('BEGIN TRANSACTION');
    let appender: DuckDBAppender | undefined;
    let progressRows = this.progressRows;
    const versions = new Map<string, string>();
    try {
      appender = await connection.createAppender(this.config.tableName, this.config.schema);
      // Appends and runs of changes keep their order; a run of changes is applied set-wise.
      let changes: Change[] = [];
      for (const { row } of pending) {
        if (row.kind !== 'append') {
          changes.push(row);
          continue;
        }
        if (changes.length) {
          await this.applyChanges(changes, versions);
          changes = [];
        }
        this.appendRow(appender, row.cells);
      }
      appender.flushSync();
      appender.closeSync();
      appender = undefined;
      if (changes.length) await this.applyChanges(changes, versions);
      if (versions.size) {
        const rows = [...versions].map(([pk, seq]) => [this.tableKey, pk, seq]);
        const columns = ['table_name', 'pk', 'change_sequence'].map((name) => ({ name, type: VARCHAR }));
        await this.staged(CDC_VERSIONS, columns, rows, (cols) => `INSERT OR REPLACE INTO ${CDC_VERSIONS} (${cols}) SELECT ${cols} FROM ${STAGE}`);
      }
      const compact = this.progressRows + progress.size > PROGRESS_COMPACT_RATIO * Math.max(1000, this.lastSequence.size);
      const { subscription, identity } = this.context;
      if (compact) await connection.run(`DELETE FROM ${PROGRESS} WHERE subscription_uid = $1`, [identity.uid]);
      const marks = compact ? new Map([...this.lastSequence, ...progress]) : progress;
      if (marks.size) {
        const log = await connection.createAppender(PROGRESS);
        for (const [key, seq] of marks) {
          log.appendVarchar(identity.uid);
          log.appendVarchar(subscription);
          log.appendVarchar(key);
          log.appendBigInt(BigInt(seq));
          log.endRow();
        }
        log.closeSync();
      }
      progressRows = compact ? marks.size : this.progressRows + marks.size;
      if (ids.length) {
        const written = await connection.createAppender(WRITTEN_IDS);
        for (const { id, publishTime } of ids) {
          written.appendVarchar(identity.uid);
          written.appendVarchar(subscription);
          written.appendVarchar(id);
          written.appendTimestamp(timestampValue(BigInt(publishTime.getTime()) * 1000n));
          written.endRow();
        }
        written.closeSync();
        await this.forgetExpiredIds();
      }
      await connection.run('COMMIT');
    } catch (e) {
      try {
        appender?.closeSync();
      } catch {
        // the appender already failed; the rollback below discards its rows
      }
      await connection.run('ROLLBACK').catch(() => undefined);
      throw e;
    }
    for (const [key, seq] of progress) this.lastSequence.set(key, seq);
    for (const [pk, seq] of versions) this.cdcVersions!.set(pk, seq);
    this.counters.rowsAppended += pending.length;
    this.progressRows = progressRows;
  }

  private appendRow(appender: DuckDBAppender, cells: Cell[]): void {
    const columns = this.mapper!.columns;
    cells.forEach((cell, i) => appendCell(appender, cell, columns[i]!.type));
    appender.endRow();
  }

  /**
   * CDC: UPSERT/DELETE against the primary key, skipping changes older than the row's last one. A run of
   * changes is applied in one statement per kind (DuckDB spends milliseconds per statement) with the
   * effect of applying them one by one: per key, a DELETE anywhere in the run deletes the row first, and
   * the UPSERTs after the last DELETE merge into one (an UPSERT sets the columns its message has; DuckDB's
   * INSERT OR REPLACE leaves the others as they are, or at their default for a new row). The versions of
   * every change applied go to `versions`.
   */
  private async applyChanges(changes: Change[], versions: Map<string, string>): Promise<void> {
    const mapper = this.mapper!;
    const perKey = new Map<string, { deleteKey?: DuckDBValue[]; cells?: Cell[] }>();
    for (const change of changes) {
      if (change.changeSequence !== undefined) {
        // Versions of this transaction first, then the committed ones.
        const applied = versions.get(change.pk) ?? this.cdcVersions!.get(change.pk);
        if (applied !== undefined && compareChangeSequence(change.changeSequence, applied) <= 0) continue;
        versions.set(change.pk, change.changeSequence);
      }
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
      await this.staged(target, keys, deletes, () => `DELETE FROM ${target} USING ${STAGE} WHERE ${on}`);
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
      await this.staged(target, columns, rows, (cols) => `INSERT OR REPLACE INTO ${target} (${cols}) SELECT ${cols} FROM ${STAGE}`);
    }
  }

  /** Appends `rows` to a scratch table shaped like `columns` of `table`, runs `sql(columnList)`, drops it. */
  private async staged(
    table: string,
    columns: { name: string; type: DuckDBType }[],
    rows: Cell[][],
    sql: (columnList: string) => string,
  ): Promise<void> {
    const connection = this.connection!;
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

  /**
   * A message past the subscription's messageRetentionDuration can never be delivered again (not even by
   * a seek), so its id need not be remembered: at most once a minute, those ids go.
   */
  private async forgetExpiredIds(): Promise<void> {
    const now = this.now();
    if (now - this.idsPrunedAt < 60_000) return;
    this.idsPrunedAt = now;
    const cutoff = timestampValue(BigInt(now - this.context.spec.messageRetentionDuration * 1000) * 1000n);
    await this.connection!.run(`DELETE FROM ${WRITTEN_IDS} WHERE subscription_uid = $1 AND publish_time < $2`, [this.context.identity.uid, cutoff]);
  }

  private idsPrunedAt = 0;

  private async alreadyWrittenIds(ids: string[]): Promise<Set<string>> {
    if (!ids.length) return new Set();
    const result = await this.connection!.runAndReadAll(
      `SELECT message_id FROM ${WRITTEN_IDS} WHERE subscription_uid = ${quoteString(this.context.identity.uid)} AND message_id IN (${ids.map(quoteString).join(', ')})`,
    );
    return new Set(result.getRows().map((r) => String(r[0])));
  }

  async flush(): Promise<WriteResult> {
    return emptyResult(); // every write is committed before it resolves; nothing is buffered
  }

  async close(): Promise<void> {
    this.connection?.closeSync();
    this.connection = undefined;
  }
}

/** A DuckDB file begins with a 8-byte checksum, then this. */
const DUCKDB_MAGIC = Buffer.from('DUCK');

/** What is wrong with the database file, if anything; `opened` is the file the instance opened. */
function fileProblem(path: string, opened: { dev: number; ino: number } | undefined): string | undefined {
  let stat;
  try {
    stat = statSync(path);
  } catch {
    return 'was deleted';
  }
  if (opened && (stat.dev !== opened.dev || stat.ino !== opened.ino)) return 'was replaced by another file';
  const header = Buffer.alloc(12);
  const fd = openSync(path, 'r');
  try {
    readSync(fd, header, 0, header.length, 0);
  } finally {
    closeSync(fd);
  }
  return header.subarray(8, 12).equals(DUCKDB_MAGIC) ? undefined : 'has no DuckDB header (truncated or overwritten)';
}

/** Errors about a row's values (not the database or the table as a whole). */
function isDataError(e: unknown): boolean {
  return /^(Constraint|Conversion|Invalid Input|Out of Range|Mismatch Type) Error/.test((e as Error).message ?? '');
}

/** The typed append calls are several times faster than the generic appendValue. */
function appendCell(appender: DuckDBAppender, cell: Cell, type: DuckDBType): void {
  if (cell === DEFAULT) return appender.appendDefault();
  if (cell === null) return appender.appendNull();
  switch (type.typeId) {
    case DuckDBTypeId.VARCHAR:
      if (typeof cell === 'string') return appender.appendVarchar(cell);
      break;
    case DuckDBTypeId.BIGINT:
      if (typeof cell === 'bigint') return appender.appendBigInt(cell);
      break;
    case DuckDBTypeId.INTEGER:
      if (typeof cell === 'number') return appender.appendInteger(cell);
      break;
    case DuckDBTypeId.DOUBLE:
      if (typeof cell === 'number') return appender.appendDouble(cell);
      break;
    case DuckDBTypeId.BOOLEAN:
      if (typeof cell === 'boolean') return appender.appendBoolean(cell);
      break;
    case DuckDBTypeId.TIMESTAMP:
      if (cell instanceof DuckDBTimestampValue) return appender.appendTimestamp(cell);
      break;
    case DuckDBTypeId.BLOB:
      if (cell instanceof DuckDBBlobValue) return appender.appendBlob(cell.bytes);
      break;
  }
  appender.appendValue(cell, type);
}
