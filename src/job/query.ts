import { DuckDBInstance, StatementType, type DuckDBConnection } from '@duckdb/node-api';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { QueryView } from '../connector/capabilities.js';
import { OrderlyError } from '../core/errors.js';
import { cannotOpen, connectDuckDb, duckDbSettings } from '../duckdb/database.js';
import { quoteIdent, quoteString } from '../duckdb/sql.js';
import { answerColumns, answerRows } from './answer-columns.js';
import { exportTargetOf } from './export-target.js';
import type { JobRuntime } from './job-runtime.js';
import { remoteExportTargets } from './remote-job.js';
import { queryMemoryError } from './query-memory-error.js';
import { queryViewNames } from './query-view-names.js';

/**
 * Runs SQL over the job's DuckDB database (the one a settings section names, e.g. `duckdb.path`; else
 * `<dataDir>/query.duckdb`), with one view per export subscription whose connector offers query views
 * (Parquet object-storage subscriptions: their committed objects), named by queryViewNames.
 *
 * How the query reaches the database depends on how the job was opened:
 * - read-only (`JobRuntime.start(job, logger, { mode: 'read-only' })`, `orderly query`): its own read-only
 *   instance of the file, locked down so the SQL can neither change the database nor read or write any
 *   file but the database and the views' files. Nothing else in the process may have that file open (a
 *   second instance of a file in one process sees stale data); a read-only job opens none.
 * - otherwise (`orderly query --write`, the demo): the process's read-write instance, which exports may be
 *   writing through at the same time; the SQL can do anything DuckDB can.
 */
export async function queryJob(
  runtime: JobRuntime,
  sql: string,
  /** Told what a view leaves out of its sink (objects of another format), once per such view. */
  onNote: (note: string) => void = () => undefined,
  /**
   * Given the answer's rows a chunk at a time from DuckDB's result (then the promise resolves to []), so
   * an answer of any size never has to be held at once, with the answer's column names (it is called once
   * with no rows for an answer without any); without it the rows are returned.
   */
  onRows?: RowSink,
): Promise<Record<string, unknown>[]> {
  const prepared = await queryViews(runtime);
  for (const note of prepared.notes) onNote(note);
  const path = runtime.queryDatabase ?? join(runtime.job.dataDir, 'query.duckdb');
  if (!runtime.readOnly) {
    // A database of the job's own for queries takes the query limit (memory.duckdb), not a table export's.
    const use = runtime.queryDatabase ? 'tables' : 'other';
    const connection = await connectDuckDb(path, use);
    try {
      return await runWithViews(connection, prepared, sql, false, onNote, onRows);
    } catch (e) {
      throw queryMemoryError(e, use);
    } finally {
      connection.closeSync();
    }
  }
  // A database not created yet has no tables to read; the views still work on an empty in-memory one.
  // Within the job's DuckDB memory and threads (memory.duckdb, memory.duckdbThreads).
  const instance = existsSync(path)
    ? await DuckDBInstance.create(path, duckDbSettings('other', { access_mode: 'READ_ONLY' })).catch((e: unknown) => {
        throw cannotOpen(path, e);
      })
    : await DuckDBInstance.create(':memory:', duckDbSettings('other'));
  try {
    const connection = await instance.connect();
    try {
      await lockDown(connection, prepared.files);
      return await runWithViews(connection, prepared, sql, true, onNote, onRows);
    } catch (e) {
      const message = (e as Error).message;
      if (/read-only mode|file system operations are disabled|configuration has been locked|disabled through configuration/.test(message)) {
        throw new OrderlyError('FAILED_PRECONDITION', `${message}\n${READ_ONLY}`);
      }
      throw queryMemoryError(e, 'other');
    } finally {
      connection.closeSync();
    }
  } finally {
    instance.closeSync();
  }
}

/** Takes an answer's rows, a chunk at a time, and its column names (see queryJob). */
export type RowSink = (rows: Record<string, unknown>[], columns: string[]) => Promise<void> | void;

const READ_ONLY = '(orderly query is read-only: it cannot change the database or touch other files; use --write to allow that)';

/** The views of the exports: what each selects, the files they read, and those that could not be made (why). */
interface PreparedViews {
  views: { subscription: string; select: string }[];
  /** The job's project: its subscriptions' views are named by their ids (queryViewNames). */
  projectId: string;
  files: string[];
  unavailable: string[];
  /** Export subscriptions whose connector offers no view, and why: for a query naming the view one would have. */
  withoutView: { subscription: string; why: string }[];
  /** What views leave out of their sinks (QueryView.leftOut), each with its subscription. */
  notes: string[];
}

/** The views of every export subscription (every project) whose connector offers one (see PreparedViews). */
async function queryViews(runtime: JobRuntime): Promise<PreparedViews> {
  const { core } = runtime;
  const offered: { subscription: string; select: string }[] = [];
  const files: string[] = [];
  const unavailable: string[] = [];
  const notes: string[] = [];
  const withoutView: { subscription: string; why: string }[] = [];
  const offer = async (subscription: string, connector: string, made: () => Promise<QueryView | undefined> | undefined) => {
    try {
      const view = await made();
      if (!view) {
        withoutView.push({ subscription, why: `its connector "${connector}" offers no query view of it` });
        return;
      }
      files.push(...view.files);
      offered.push({ subscription, select: view.select });
      if (view.leftOut) notes.push(`${subscription}: ${view.leftOut}`);
    } catch (e) {
      // Its sink cannot be read now (S3 down, an object gone): the other views and the tables still can.
      unavailable.push(`${subscription}: ${(e as Error).message}`);
    }
  };
  for (const sub of core.allSubscriptions()) {
    const found = exportTargetOf(core, runtime.connectorSettings, sub);
    if (found) await offer(sub.name, found.factory.name, () => found.factory.queryView?.(found.target));
  }
  // A fleet's remote exports: what every worker wrote, read from the sink.
  for (const found of remoteExportTargets(runtime.job, runtime.connectorSettings))
    await offer(found.target.subscription, found.factory.name, () => found.factory.queryView?.(found.target));
  return {
    views: offered,
    projectId: core.projectId,
    files,
    unavailable,
    withoutView,
    notes,
  };
}

/**
 * Statements a read-only query refuses, whatever their paths: DuckDB always lets the SQL open the database
 * file and its WAL, and the views' files, for writing too (`COPY ... TO '<database>' (USE_TMP_FILE false)`
 * overwrote the database; a WAL written so is replayed by the next read-write open), so writes are refused
 * by kind. PREPARE and EXECUTE could run any of them.
 */
const WRITING_STATEMENTS = new Map<StatementType, string>([
  [StatementType.COPY, 'COPY'],
  [StatementType.EXPORT, 'EXPORT DATABASE'],
  [StatementType.COPY_DATABASE, 'COPY FROM DATABASE'],
  [StatementType.ATTACH, 'ATTACH'],
  [StatementType.PREPARE, 'PREPARE'],
  [StatementType.EXECUTE, 'EXECUTE'],
]);

/** Why a read-only query may not run a statement of this kind (`sql` the whole query), if it may not. */
function refusedReadOnly(type: StatementType, sql: string): string | undefined {
  const kind = WRITING_STATEMENTS.get(type);
  if (kind) return `${kind} statements can write files`;
  // EXPLAIN ANALYZE runs the statement it explains (EXPLAIN ANALYZE COPY ... TO writes).
  if (type === StatementType.EXPLAIN && /analy[sz]e/i.test(sql))
    return 'EXPLAIN ANALYZE runs the statement it explains, which can write files';
  return undefined;
}

/**
 * Runs every statement of `sql` in order and answers with the last one's rows: the answer stays one
 * table (`--json` one array). `runAndReadAll` ran them all but answered with the first SELECT's rows.
 * Read-only, a statement that could write files is refused before it runs.
 */
async function lastResult(
  connection: DuckDBConnection,
  sql: string,
  readOnly: boolean,
  onRows?: RowSink,
): Promise<Record<string, unknown>[]> {
  const statements = await connection.extractStatements(sql).catch((e: unknown) => {
    // DuckDB's whole answer to SQL that holds no statement (`;`, a comment alone).
    if ((e as Error).message === 'Error in native callback')
      throw new OrderlyError('INVALID_ARGUMENT', 'the query holds no statement (only comments or semicolons): give the query to run');
    throw e;
  });
  let rows: Record<string, unknown>[] = [];
  for (let i = 0; i < statements.count; i++) {
    // Each is prepared once those before it ran: it may read what they made (a temp table).
    const statement = await statements.prepare(i);
    const refused = readOnly ? refusedReadOnly(statement.statementType, sql) : undefined;
    if (refused) throw new OrderlyError('FAILED_PRECONDITION', `statement ${i + 1} of the query is refused: ${refused}\n${READ_ONLY}`);
    if (onRows && i === statements.count - 1) {
      // Materialized in DuckDB (which can spill it), read a chunk at a time: a streamed result ends quietly
      // at an error (@duckdb/node-api's fetchChunk answers an empty chunk), a truncated answer with exit 0.
      const result = await statement.run();
      const keys = answerColumns(result.columnNames());
      let answered = false;
      for await (const chunk of result.yieldRowsJson()) {
        answered = true;
        await onRows(answerRows(keys, chunk), keys);
      }
      if (!answered) await onRows([], keys);
      return [];
    }
    const reader = await statement.runAndReadAll();
    rows = answerRows(answerColumns(reader.columnNames()), reader.getRowsJson());
  }
  return rows;
}

/**
 * Makes the views it can (named around the database's own tables: queryViewNames) and runs `sql`. A view that cannot be made fails only a query that needs it: the
 * error then says which views are missing and why.
 */
async function runWithViews(
  connection: DuckDBConnection,
  prepared: PreparedViews,
  sql: string,
  readOnly: boolean,
  onNote: (note: string) => void,
  onRows?: RowSink,
): Promise<Record<string, unknown>[]> {
  const unavailable = [...prepared.unavailable];
  const subscriptions = prepared.views.map((v) => v.subscription);
  const names = queryViewNames(subscriptions, prepared.projectId, await mainSchemaNames(connection));
  for (const [subscription, name] of queryViewNames(subscriptions, prepared.projectId))
    if (names.get(subscription) !== name)
      onNote(`${subscription}: its view is ${quoteIdent(names.get(subscription)!)}: the database has a table or view named ${name}`);
  for (const v of prepared.views) {
    try {
      await connection.run(`CREATE OR REPLACE TEMP VIEW ${quoteIdent(names.get(v.subscription)!)} AS ${v.select}`);
    } catch (e) {
      unavailable.push(`${v.subscription}: ${(e as Error).message}`);
    }
  }
  try {
    return await lastResult(connection, sql, readOnly, onRows);
  } catch (e) {
    // Only an error about a missing view (or table) can be the views' doing.
    const message = (e as Error).message.toLowerCase();
    const wouldBe = queryViewNames([...subscriptions, ...prepared.withoutView.map((w) => w.subscription)], prepared.projectId);
    const named = prepared.withoutView
      .filter((w) => message.includes(` ${wouldBe.get(w.subscription)!.toLowerCase()} does not exist`))
      .map((w) => `${w.subscription}: ${w.why}`);
    const why = [
      ...(unavailable.length ? [`views not available: ${unavailable.join('; ')}`] : []),
      ...(named.length ? [`no view: ${named.join('; ')}`] : []),
    ];
    if (!why.length || !/does not exist/.test((e as Error).message)) throw e;
    throw new OrderlyError('FAILED_PRECONDITION', `${(e as Error).message}\n(${why.join('; ')})`);
  }
}

/**
 * The tables and views of the database's main schema, the one unqualified names reach: a view of the same
 * name would hide them.
 */
async function mainSchemaNames(connection: DuckDBConnection): Promise<string[]> {
  const reader = await connection.runAndReadAll(
    `SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main'
     UNION ALL SELECT view_name FROM duckdb_views() WHERE database_name = current_database() AND schema_name = 'main' AND NOT internal`,
  );
  return reader.getRows().map(([name]) => String(name));
}

/**
 * No file access but the database itself and `files` (DuckDB adds the database and its WAL to the allowed
 * paths on its own): no COPY ... TO, ATTACH, read_csv('/etc/...') or extension loading; then the settings are
 * locked so the SQL cannot turn this off again.
 */
async function lockDown(connection: DuckDBConnection, files: string[]): Promise<void> {
  await connection.run(`SET allowed_paths = [${files.map(quoteString).join(', ')}]`);
  await connection.run('SET enable_external_access = false');
  await connection.run('SET lock_configuration = true');
}
