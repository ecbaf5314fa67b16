import type { DuckDBAppender, DuckDBConnection, DuckDBInstance } from '@duckdb/node-api';
import {
  SinkBusyError,
  SinkStateError,
  emptyResult,
  type Connector,
  type ConnectorContext,
  type ExportMessage,
  type WriteResult,
} from '../../src/connector/connector.js';
import { FailedKeys } from '../../src/connector/failed-keys.js';
import type { PubsubMessage } from '../../src/core/message.js';
import { LoopSlicer } from '../../src/connector/loop-slicer.js';
import { CommittedRanges } from '../../src/connector/committed-ranges.js';
import { RedeliveryFilter } from '../../src/connector/redelivery-filter.js';
import { connectToDuckDb, discardDuckDb, duckDbLockHolder, openDuckDb } from '../../src/duckdb/database.js';
import { quoteIdent } from '../../src/duckdb/sql.js';
import { oneAtATime } from '../../src/duckdb/one-at-a-time.js';
import { appendCell } from './append-cell.js';
import { CdcApplier, type Change } from './cdc-apply.js';
import { computedDefaults, fillComputedDefaults, type ComputedDefault } from './computed-defaults.js';
import type { DuckDbTableConfig } from './config.js';
import { databaseFileProblem, DuckDbFileError } from './database-file.js';
import { ConversionError } from './json-to-column.js';
import { adoptNameKeyedProgress } from './legacy-progress.js';
import { ProgressLog } from './progress-log.js';
import { RowMapper, SchemaMismatch, type Cell, type Column, type Row } from './row-mapper.js';
import { DuckDbWrittenIds } from './written-ids.js';
import { DuckDbMemoryError } from './memory-error.js';
import { isDuckDbMemoryError } from '../../src/duckdb/limits.js';

export { DuckDbFileError } from './database-file.js';

/** DuckDB's vector size: the appender hands its rows to the table a vector at a time. */
const APPENDER_FLUSH_ROWS = 2048;

/**
 * The writers connected through each instance. Closing an instance leaves the connections other writers
 * hold on it working, on the same file a new instance would then open too: only a sole writer closes it.
 */
const writersOf = new WeakMap<DuckDBInstance, Set<DuckDbTableWriter>>();

interface Pending {
  em: ExportMessage;
  row: Row;
}

/** A message's row, or why it has none. */
type Mapped = Row | ConversionError | SchemaMismatch;

/**
 * The DuckDB table writer (BigQuery-subscription style). Appends rows with the DuckDB appender in
 * per-key order. Effectively once: what a redelivery may bring again is recorded in the same transaction
 * as the rows — the written sequence ranges per (subscription uid, ordering key) in the progress log, and
 * the ids of messages recognised by id (no key, unordered, or from a remote Pub/Sub: see RedeliveryMark)
 * — so a redelivery after a crash is recognised and skipped instead of written twice. Keyed by the uid,
 * a subscription created again under the same name starts with nothing written.
 *
 * DuckDB takes one writing process per file: while another process (another worker of a fleet) has the
 * file open, `open()` throws SinkBusyError and the runner waits as a standby.
 */
export class DuckDbTableWriter implements Connector {
  private connection?: DuckDBConnection;
  /** A second connection, to read the table's definition while a commit runs on `connection`. */
  private catalogConnection?: DuckDBConnection;
  private mapper?: RowMapper;
  /** The target table's columns whose default the appender cannot fill, read with the mapper. */
  private computed: ComputedDefault[] = [];
  /** The table's definition the mapper was built from (see tableDefinition). */
  private mappedDefinition?: string;
  readonly counters = { rowsAppended: 0, changesApplied: 0 };
  private progress?: ProgressLog;
  private readonly writtenIds: DuckDbWrittenIds;
  /** Each ordering key's sequence ranges in the table: what the progress log records, the filter checks. */
  private readonly written = new CommittedRanges();
  private readonly filter: RedeliveryFilter;
  private cdc?: CdcApplier;
  /**
   * The database's catalog (DuckDB names it after the file: `analytics` for analytics.duckdb) and the
   * target quoted with it, read at open: a schema of the catalog's name made `schema.table` an ambiguous
   * reference, and every write of the export failed.
   */
  private catalog?: string;
  private target?: string;
  /** The database instance the writer connected through. */
  private instance?: DuckDBInstance;
  private readonly subscription: { name: string; uid: string };
  /** The last batch's commit, running in the background while the runner hands over the next batch. */
  private inflight?: Promise<void>;
  private inflightDone = false;
  /** Outcomes not yet reported to the runner. */
  private settled = emptyResult();
  /**
   * Messages that failed in a background commit, until reported: the runner's nack then revokes their
   * keys' later deliveries, but those in a batch it handed over before that are deferred here.
   */
  private readonly failedInCommit: PubsubMessage[] = [];
  /** The messages of a background commit that failed with SinkStateError, committed first by the next call. */
  private retry?: ExportMessage[];

  constructor(
    private readonly config: DuckDbTableConfig,
    private readonly context: ConnectorContext,
    private readonly databasePath: string,
    now: () => number = Date.now,
  ) {
    this.subscription = { name: context.subscription, uid: context.identity.uid };
    this.writtenIds = new DuckDbWrittenIds(() => this.connection!, this.subscription, context.spec, now);
    this.filter = new RedeliveryFilter(this.writtenIds, context.spec.enableMessageOrdering, this.written);
  }

  async open(): Promise<void> {
    await this.releasingOnMemoryError(() => this.openConnection());
  }

  private async openConnection(): Promise<void> {
    if (!this.connection) {
      try {
        this.instance = await openDuckDb(this.databasePath);
      } catch (e) {
        const holder = duckDbLockHolder(e);
        if (holder === undefined) throw e;
        throw new SinkBusyError(
          `standby: DuckDB database ${this.databasePath} is open in another process (pid ${holder}); this worker takes over once it exits`,
        );
      }
      const connection = await connectToDuckDb(this.instance);
      try {
        await this.checkFile();
        // A standby taking the file over: the job's init statements, deferred while another process held it.
        const init = this.context.settings.duckdbInit;
        if (typeof init === 'function') await (init as () => Promise<void>)();
        await oneAtATime(this.instance, async () => {
          await ProgressLog.create(connection);
          await DuckDbWrittenIds.create(connection);
          await CdcApplier.create(connection);
          if (this.context.identity.adoptsNameKeyedProgress) await adoptNameKeyedProgress(connection, this.subscription);
        });
        this.progress = await ProgressLog.load(connection, this.subscription, this.written);
      } catch (e) {
        connection.closeSync();
        throw e;
      }
      this.connection = connection;
      const { schema, tableName } = this.config;
      this.catalog = String((await connection.runAndReadAll('SELECT current_database()')).getRows()[0]![0]);
      this.target = [this.catalog, schema, tableName].map(quoteIdent).join('.');
      this.cdc = new CdcApplier(`${schema}.${tableName}`, this.target);
      this.catalogConnection = await connectToDuckDb(this.instance);
      const writers = writersOf.get(this.instance) ?? new Set();
      writersOf.set(this.instance, writers.add(this));
    }
    await this.loadTable();
  }

  /**
   * Checks that the database path still names the file the instance opened, and that it starts with a
   * DuckDB header. On a problem the instance is closed in this process, so the next open reads the file
   * afresh, and DuckDbFileError is thrown.
   */
  private async checkFile(): Promise<void> {
    const found = this.instance ? databaseFileProblem(this.databasePath, this.instance) : undefined;
    if (found === undefined) return;
    this.closeConnection();
    this.mapper = undefined;
    if (this.instance) await discardDuckDb(this.databasePath, this.instance, { moved: found.moved });
    throw new DuckDbFileError(this.databasePath, found.problem);
  }

  /**
   * Runs `work` (a call of the connector contract). When DuckDB runs out of memory in it, the failure is a
   * DuckDbMemoryError, after closing this process's instance of the file if no other writer uses it: what
   * it pinned is released, and a database a failed checkpoint invalidated is usable again only attached
   * afresh (the runner reopens the writer, which opens a new instance). With other writers on it, the
   * instance stays as it is (see writersOf).
   */
  private async releasingOnMemoryError<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (e) {
      if (e instanceof DuckDbMemoryError || !isDuckDbMemoryError(e)) throw e;
      const columns = this.mapper?.columns.map((c) => c.type);
      await this.inflight?.catch(() => undefined);
      this.inflight = undefined;
      this.closeConnection();
      this.mapper = undefined;
      if (this.instance && !writersOf.get(this.instance)?.size) await discardDuckDb(this.databasePath, this.instance);
      throw new DuckDbMemoryError(this.databasePath, this.config.table, e, columns);
    }
  }

  /** Reads the target table's columns and primary key; the sink is unusable without a fitting table. */
  private async loadTable(): Promise<RowMapper> {
    const connection = this.connection!;
    const { schema, tableName, table } = this.config;
    // Read first: an ALTER between it and the columns read below makes the next batch load them again.
    this.mappedDefinition = await this.tableDefinition(connection);
    const info = await connection.runAndReadAll(
      'SELECT column_name, is_nullable, column_default FROM information_schema.columns WHERE table_catalog = current_database() AND table_schema = $1 AND table_name = $2 ORDER BY ordinal_position',
      [schema, tableName],
    );
    const rows = info.getRows();
    if (!rows.length) {
      throw new SinkStateError('NOT_FOUND', `table ${table} (DuckDB ${this.target} in ${this.databasePath}) does not exist`);
    }
    const appender = await connection.createAppender(tableName, schema, this.catalog);
    const columns: Column[] = rows.map(([name, nullable, dflt], i) => ({
      name: String(name),
      type: appender.columnType(i),
      nullable: nullable === 'YES',
      hasDefault: dflt !== null,
    }));
    appender.closeSync();
    this.computed = await computedDefaults(
      connection,
      { catalog: this.catalog!, schema, table: tableName },
      rows.flatMap(([, , dflt], index) => (dflt === null ? [] : [{ index, sql: String(dflt) }])),
    );
    const pk = await connection.runAndReadAll(
      "SELECT constraint_column_names FROM duckdb_constraints() WHERE database_name = current_database() AND schema_name = $1 AND table_name = $2 AND constraint_type = 'PRIMARY KEY'",
      [schema, tableName],
    );
    const pkColumns = (pk.getRowObjectsJson()[0]?.constraint_column_names as string[] | undefined) ?? [];
    try {
      this.mapper = new RowMapper(columns, pkColumns, this.config, this.context.subscription, () => this.context.topicSchema?.());
    } catch (e) {
      if (e instanceof SchemaMismatch) throw new SinkStateError('SCHEMA_MISMATCH', e.message);
      throw e;
    }
    return this.mapper;
  }

  /**
   * The table's definition as DuckDB prints it back (`CREATE TABLE ...`: column names, types, NOT NULL,
   * defaults, key), or undefined when it does not exist. Through the writer's connection only while no
   * commit runs on it.
   */
  private async tableDefinition(connection: DuckDBConnection): Promise<string | undefined> {
    const reader = await connection.runAndReadAll(
      'SELECT sql FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = $1 AND table_name = $2',
      [this.config.schema, this.config.tableName],
    );
    const sql = reader.getRows()[0]?.[0];
    return sql === undefined || sql === null ? undefined : String(sql);
  }

  /**
   * Pipelined: the batch is mapped while the previous one commits (DuckDB commits on its own threads),
   * then its rows are appended and committed in the background once that commit is done, and the call
   * reports what finished meanwhile (the previous batch). Commits stay one at a time and in order, so
   * each key's rows are committed in order; a key whose message failed in the previous commit has its
   * messages here deferred. `flush` reports the last commit (`'due'` once it finished, `'all'` waiting for it).
   */
  write(batch: ExportMessage[]): Promise<WriteResult> {
    return this.releasingOnMemoryError(() => this.writeBatch(batch));
  }

  private async writeBatch(batch: ExportMessage[]): Promise<WriteResult> {
    if (!this.mapper) await this.settle(); // a failed commit may have dropped the mapper: loading needs the connection idle
    const mapper = this.mapper ?? (await this.loadTable());
    // Read beside the previous batch's commit, on a connection of its own: read after it, on the writer's,
    // it took 15-25% off the export's rate (bench/duckdb-export.ts). A read that fails leaves the check to
    // the commit (a table gone is NOT_FOUND there, the batch kept for its retry).
    const definition = this.tableDefinition(this.catalogConnection!).catch(() => this.mappedDefinition);
    const mapped = await mapAll(mapper, batch);
    await this.settle();
    // Altered since the mapper was built (library use: the table can only change from this process): the
    // batch is mapped by the columns as they are now. An added column's fields were refused as unknown,
    // and a renamed one took its old name's fields, leaving its new name's unknown (NULL with dropUnknownFields).
    const now = await definition;
    if (now !== undefined && now !== this.mappedDefinition) this.mapper = undefined;
    await this.retryFailedCommit();
    await this.begin(batch, this.mapper === mapper ? mapped : undefined);
    return this.report();
  }

  /**
   * Settles each delivery of the batch that can be settled at once (already written, failed to map, or
   * deferred behind its key's failure) and starts committing the rest in the background (`inflight`).
   * `mapped`: the batch's rows, mapped beforehand (mapped here when absent).
   */
  private async begin(batch: ExportMessage[], mapped?: Mapped[]): Promise<void> {
    const rows = mapped ?? (await mapAll(this.mapper ?? (await this.loadTable()), batch));
    const result = emptyResult();
    const failedKeys = new FailedKeys(this.context.spec.enableMessageOrdering);
    for (const m of this.failedInCommit) failedKeys.fail(m);
    const written = await this.filter.written(batch);
    const pending: Pending[] = [];
    batch.forEach((em, i) => {
      const row = rows[i]!;
      if (failedKeys.blocks(em.message)) {
        result.deferred.push(em.id);
      } else if (written.has(em.id)) {
        result.written.push(em.id); // a redelivery of what is already in the table
      } else if (row instanceof SchemaMismatch) {
        throw new SinkStateError('SCHEMA_MISMATCH', row.message);
      } else if (row instanceof ConversionError) {
        result.failed.push({ id: em.id, error: row.message, retryable: false });
        failedKeys.fail(em.message);
      } else {
        pending.push({ em, row });
      }
    });
    // Found already written means found in the file: not in one that was deleted or truncated since.
    await this.checkFile();
    addResult(this.settled, result);
    if (!pending.length) return;
    const inflight = this.commitInBackground(pending);
    this.inflight = inflight;
    this.inflightDone = false;
    void inflight.then(
      () => (this.inflightDone = true),
      () => (this.inflightDone = true), // the failure itself is taken by settle()
    );
  }

  /** Commits `pending` (one message at a time once the table refused a row) and records the outcome for the next report. */
  private async commitInBackground(pending: Pending[]): Promise<void> {
    const result = emptyResult();
    try {
      try {
        await this.commit(pending);
        result.written.push(...pending.map((p) => p.em.id));
      } catch (e) {
        this.rethrowIfSinkGone(e);
        if (!isDataError(e)) throw e;
        // A row the table refused (constraint, cast): find it by writing one row per transaction, so only
        // the bad message fails and its key stops there.
        await this.commitOneByOne(pending, result);
      }
      await this.checkFile();
    } catch (e) {
      // The sink is unusable for now: the runner retries the next call, which commits these first.
      if (e instanceof SinkStateError) this.retry = pending.map((p) => p.em);
      throw e;
    }
    const failed = new Set(result.failed.map((f) => f.id));
    for (const { em } of pending) if (failed.has(em.id)) this.failedInCommit.push(em.message);
    addResult(this.settled, result);
    this.context.notify();
  }

  /** Waits for the commit in the background, if any; throws its failure. */
  private async settle(): Promise<void> {
    const inflight = this.inflight;
    this.inflight = undefined;
    await inflight;
  }

  /** Commits again, first, the messages of a background commit that failed with SinkStateError. */
  private async retryFailedCommit(): Promise<void> {
    const retry = this.retry;
    if (!retry) return;
    this.retry = undefined;
    try {
      await this.begin(retry);
    } catch (e) {
      this.retry = retry;
      throw e;
    }
    await this.settle(); // a SinkStateError again keeps them for the next call
  }

  /** What was settled since the last report. */
  private report(): WriteResult {
    const result = this.settled;
    this.settled = emptyResult();
    this.failedInCommit.length = 0;
    return result;
  }

  private async commitOneByOne(pending: Pending[], result: WriteResult): Promise<void> {
    // Only a refusal here holds back its key's later messages: a pending message precedes every failure
    // of its key that `begin` settled (those failed to map, and the key's messages after them were deferred).
    const failedKeys = new FailedKeys(this.context.spec.enableMessageOrdering);
    for (const p of pending) {
      if (failedKeys.blocks(p.em.message)) {
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
        failedKeys.fail(p.em.message);
      }
    }
  }

  private rethrowIfSinkGone(e: unknown): void {
    const message = (e as Error).message ?? String(e);
    if (/Table with name .* does not exist|Table ".*" could not be found|Catalog Error/i.test(message)) {
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
    // Per key, the lowest and highest sequence the batch writes.
    const progress = new Map<string, [number, number]>();
    const ids: { id: string; publishTime: Date }[] = [];
    for (const { em } of pending) {
      const mark = this.filter.mark(em.message);
      if (mark.by === 'id') ids.push({ id: mark.id, publishTime: em.message.publishTime });
      else {
        const span = progress.get(mark.key);
        if (!span) progress.set(mark.key, [mark.sequence, mark.sequence]);
        else span[1] = Math.max(span[1], mark.sequence);
      }
    }
    await connection.run('BEGIN TRANSACTION');
    let appender: DuckDBAppender | undefined;
    const versions = new Map<string, string>();
    let applyProgress: () => void;
    let appended = 0;
    let changed = 0;
    const slicer = new LoopSlicer();
    try {
      if (this.computed.length)
        await fillComputedDefaults(
          connection,
          this.computed,
          pending.flatMap(({ row }) => (row.kind === 'append' ? [row.cells] : [])),
        );
      appender = await connection.createAppender(this.config.tableName, this.config.schema, this.catalog);
      // Appends and runs of changes keep their order: the rows the appender holds go into the transaction
      // before a run of changes after them is applied (set-wise, by statements of their own).
      let changes: Change[] = [];
      let unflushed = 0;
      for (const { row } of pending) {
        if (slicer.due) await slicer.yield();
        if (row.kind !== 'append') {
          if (unflushed) appender.flushSync();
          unflushed = 0;
          changes.push(row);
          continue;
        }
        if (changes.length) {
          changed += await this.cdc!.apply(connection, this.mapper!, changes, versions);
          changes = [];
        }
        this.appendRow(appender, row.cells);
        appended++;
        // A whole vector at a time: flushed every slice instead (~350 rows), the flushes took 2-3x as long.
        if (++unflushed === APPENDER_FLUSH_ROWS) {
          appender.flushSync();
          unflushed = 0;
        }
      }
      appender.flushSync();
      appender.closeSync();
      appender = undefined;
      if (changes.length) changed += await this.cdc!.apply(connection, this.mapper!, changes, versions);
      await this.cdc!.saveVersions(connection, versions);
      applyProgress = await this.progress!.append(connection, progress);
      await this.writtenIds.append(ids);
      await connection.run('COMMIT');
    } catch (e) {
      try {
        // Its rows go first: an appender that still holds rows flushes them again when it is garbage
        // collected, into whatever transaction the connection has then, and aborts that one instead.
        appender?.clear();
        appender?.closeSync();
      } catch {
        // the appender already failed; the rollback below discards what it wrote
      }
      await connection.run('ROLLBACK').catch(() => undefined);
      throw e;
    }
    applyProgress();
    this.counters.rowsAppended += appended;
    this.counters.changesApplied += changed;
  }

  private appendRow(appender: DuckDBAppender, cells: Cell[]): void {
    const columns = this.mapper!.columns;
    cells.forEach((cell, i) => appendCell(appender, cell, columns[i]!.type));
    appender.endRow();
  }

  flush(mode: 'due' | 'all'): Promise<WriteResult> {
    return this.releasingOnMemoryError(() => this.flushCommits(mode));
  }

  private async flushCommits(mode: 'due' | 'all'): Promise<WriteResult> {
    if (mode === 'all' || this.inflightDone) await this.settle();
    await this.retryFailedCommit();
    if (mode === 'all') await this.settle();
    return this.report();
  }

  async close(): Promise<void> {
    await this.inflight?.catch(() => undefined); // its failure was reported by the call that failed, or goes with this connector
    this.inflight = undefined;
    this.closeConnection();
  }

  private closeConnection(): void {
    this.connection?.closeSync();
    this.connection = undefined;
    this.catalogConnection?.closeSync();
    this.catalogConnection = undefined;
    if (this.instance) writersOf.get(this.instance)?.delete(this);
  }
}

/** Maps each message of the batch (a message that cannot be mapped gets the error), giving the event loop back between slices. */
async function mapAll(mapper: RowMapper, batch: ExportMessage[]): Promise<Mapped[]> {
  const rows: Mapped[] = [];
  const slicer = new LoopSlicer();
  for (const em of batch) {
    if (slicer.due) await slicer.yield();
    try {
      rows.push(mapper.map(em));
    } catch (e) {
      if (!(e instanceof SchemaMismatch || e instanceof ConversionError)) throw e;
      rows.push(e);
    }
  }
  return rows;
}

function addResult(into: WriteResult, more: WriteResult): void {
  into.written.push(...more.written);
  into.failed.push(...more.failed);
  into.deferred.push(...more.deferred);
}

/**
 * Errors about a row's values (not the database or the table as a whole). The appender reports a
 * constraint a row breaks as "Failed to append: Duplicate key ... violates primary key constraint" (NOT
 * NULL and CHECK alike).
 */
function isDataError(e: unknown): boolean {
  const message = (e as Error).message ?? '';
  return (
    /^(Constraint|Conversion|Invalid Input|Out of Range|Mismatch Type) Error/.test(message) ||
    /^Failed to append: .*constraint/i.test(message)
  );
}
