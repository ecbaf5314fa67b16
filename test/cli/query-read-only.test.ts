import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parse, stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadJob } from '../../src/job/job-config.js';
import { JobRuntime } from '../../src/job/job-runtime.js';
import { queryJob } from '../../src/job/query.js';
import { createLogger } from '../../src/log.js';
import { orderly, orderlyBin } from '../helpers/cli.js';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait-for.js';

const MESSAGES = 40;
let dir: ReturnType<typeof tempDir>;
let job: string;
let database: string;

/** The query's rows (--json), or the failure's stderr. */
async function query(sql: string, ...flags: string[]): Promise<{ rows?: Record<string, unknown>[]; code: number; stderr: string }> {
  const r = await orderly('query', job, sql, '--json', ...flags);
  return { rows: r.code === 0 ? (JSON.parse(r.stdout) as Record<string, unknown>[]) : undefined, code: r.code, stderr: r.stderr };
}
const fingerprint = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

beforeAll(async () => {
  dir = tempDir();
  job = join(dir.path, 'job.yaml');
  database = join(dir.path, 'data', 'db.duckdb');
  writeFileSync(
    job,
    stringify({
      projectId: 'query-test',
      dataDir: './data',
      duckdb: {
        path: './data/db.duckdb',
        init: [
          'CREATE TABLE IF NOT EXISTS events(subscription_name VARCHAR, message_id VARCHAR, publish_time TIMESTAMP, data VARCHAR, attributes JSON)',
        ],
      },
      objectStorage: { embedded: true, buckets: ['files'] },
      topics: [{ name: 'events' }],
      subscriptions: [
        { name: 'to-table', topic: 'events', bigqueryConfig: { table: 'query-test.main.events', writeMetadata: true } },
        { name: 'to-files', topic: 'events', cloudStorageConfig: { bucket: 'files', parquetConfig: { writeMetadata: true } } },
      ],
    }),
  );
  const runtime = await JobRuntime.start(loadJob(job), createLogger());
  await runtime.core.publish(
    'events',
    Array.from({ length: MESSAGES }, (_, i) => ({ data: `m${i}` })),
  );
  await waitFor('the table export', () => runtime.exports.runner('to-table')!.stats.written === MESSAGES, 30_000);
  await waitFor('the file export to buffer', () => runtime.exports.runner('to-files')!.outstanding === MESSAGES, 30_000);
  await runtime.stop(); // finalizes the open file
}, 120_000);
afterAll(() => dir.remove());

/** What `orderly query` without --write does, in this process: the job opened read-only, so the query is. */
async function readOnly(sql: string): Promise<Record<string, unknown>[]> {
  const runtime = await JobRuntime.start(loadJob(job), createLogger(), { mode: 'read-only' });
  try {
    return await queryJob(runtime, sql);
  } finally {
    await runtime.stop();
  }
}

describe('a read-only query', () => {
  it('reads the table and the Parquet view, and leaves the database file byte for byte as it was', async () => {
    const before = fingerprint(database);
    expect(await readOnly('SELECT count(*) AS n FROM main.events')).toEqual([{ n: String(MESSAGES) }]);
    expect(await readOnly('SELECT count(*) AS n, count(DISTINCT message_id) AS ids FROM to_files')).toEqual([
      { n: String(MESSAGES), ids: String(MESSAGES) },
    ]);
    expect(fingerprint(database)).toBe(before);
  });

  it.each<[string, string, string]>([
    ['COPY ... TO a file', "COPY (SELECT 1) TO '<out>'", 'file system operations are disabled by configuration'],
    ['COPY the table to a file', "COPY main.events TO '<out>' (FORMAT csv)", 'file system operations are disabled by configuration'],
    [
      'a file write that first tries to unlock the configuration',
      "SET enable_external_access = true; COPY (SELECT 1) TO '<out>'",
      'the configuration has been locked',
    ],
    // DuckDB lets the SQL open the database file and its WAL for writing: these overwrote the database.
    ['COPY over the database file', "COPY (SELECT 1 AS x) TO '<db>' (FORMAT csv, USE_TMP_FILE false)", 'COPY statements can write files'],
    ['COPY over its WAL', "COPY (SELECT 1 AS x) TO '<db>.wal' (FORMAT csv, USE_TMP_FILE false)", 'COPY statements can write files'],
    [
      'EXPLAIN ANALYZE, which runs the COPY it explains',
      "EXPLAIN ANALYZE COPY (SELECT 1 AS x) TO '<db>' (FORMAT csv, USE_TMP_FILE false)",
      'statement 1 of the query is refused: EXPLAIN ANALYZE runs the statement it explains, which can write files',
    ],
    [
      'a COPY prepared, then executed',
      "PREPARE p AS COPY (SELECT 1 AS x) TO '<db>' (FORMAT csv, USE_TMP_FILE false); EXECUTE p",
      'statement 1 of the query is refused: PREPARE statements can write files',
    ],
    ['ATTACH of a path DuckDB allows', "ATTACH '<db>.wal.recovery' AS other", 'ATTACH statements can write files'],
    ['EXPORT DATABASE', "EXPORT DATABASE '<out>'", 'file system operations are disabled by configuration'],
    ['DROP TABLE', 'DROP TABLE main.events', 'Cannot execute statement of type "DROP"'],
    ['DELETE', 'DELETE FROM main.events', 'read-only mode'],
    ['CREATE TABLE', 'CREATE TABLE stolen AS SELECT 1', 'read-only mode'],
    ['reading a file outside the job', "SELECT * FROM read_csv('/etc/passwd')", 'file system operations are disabled by configuration'],
    ['reading the job file', "SELECT * FROM read_text('<job>')", 'file system operations are disabled by configuration'],
    ['ATTACH', "ATTACH '<out>' AS other", 'ATTACH statements can write files'],
    ['loading an extension', 'LOAD httpfs', 'disabled through configuration'],
  ])('refuses %s, naming --write', async (_what, statement, problem) => {
    const before = fingerprint(database);
    const out = join(dir.path, `out-${Math.random().toString(36).slice(2)}`);
    const refused = readOnly(statement.replace('<out>', out).replace('<job>', job).replace('<db>', database));
    await expect(refused).rejects.toThrow(problem);
    await expect(refused).rejects.toThrow(
      '(orderly query is read-only: it cannot change the database or touch other files; use --write to allow that)',
    );
    expect(existsSync(out)).toBe(false);
    expect(existsSync(`${database}.wal`)).toBe(false);
    expect(existsSync(`${database}.wal.recovery`)).toBe(false);
    expect(fingerprint(database)).toBe(before);
  });

  it("refuses a COPY over a view's Parquet file (its local copy), which later queries read as the exported object", async () => {
    expect(await readOnly('SELECT count(*) AS n FROM to_files')).toEqual([{ n: String(MESSAGES) }]);
    const [file] = (await readOnly('SELECT DISTINCT filename FROM to_files')).map((r) => r.filename as string);
    const before = fingerprint(file!);
    await expect(readOnly(`COPY (SELECT 1 AS x) TO '${file}' (FORMAT parquet, USE_TMP_FILE false)`)).rejects.toThrow(
      'COPY statements can write files',
    );
    expect(fingerprint(file!)).toBe(before);
    expect(await readOnly('SELECT count(*) AS n FROM to_files')).toEqual([{ n: String(MESSAGES) }]);
  });

  it('still runs statements in order that read what those before them made, and EXPLAIN without ANALYZE', async () => {
    expect(await readOnly('CREATE TEMP TABLE t AS SELECT 2 AS n; SELECT n FROM t')).toEqual([{ n: 2 }]);
    expect((await readOnly('EXPLAIN SELECT count(*) FROM to_files'))[0]).toMatchObject({ explain_key: 'physical_plan' });
  });
});

describe('orderly query (the command)', () => {
  it('without --write, leaves the data directory as it stands whatever the job file says now: nothing created, no export changed', async () => {
    const original = parse(readFileSync(job, 'utf8')) as { subscriptions: Record<string, unknown>[] };
    const edited = join(dir.path, 'edited.yaml');
    writeFileSync(
      edited,
      stringify({
        ...original,
        subscriptions: [
          // A rename in progress: reconciled, the new name would export every later message into the table again.
          { name: 'to-table-v2', topic: 'events', bigqueryConfig: { table: 'query-test.main.events', writeMetadata: true } },
          { name: 'to-files', topic: 'events', cloudStorageConfig: { bucket: 'files', avroConfig: { writeMetadata: true } } },
        ],
      }),
    );
    const r = await orderly('query', edited, 'SELECT count(*) AS n FROM to_files', '--json');
    expect(r.stderr).toBe('');
    expect(JSON.parse(r.stdout)).toEqual([{ n: String(MESSAGES) }]);

    const runtime = await JobRuntime.start(loadJob(job), createLogger(), { mode: 'inspect' });
    try {
      expect(runtime.reconciled).toMatchObject({ created: [], updated: [], notInFile: [] });
    } finally {
      await runtime.stop();
    }
  }, 120_000);

  it('refuses COPY and DROP TABLE without --write (exit 1), and runs them with it', async () => {
    const out = join(dir.path, 'copied.csv');
    const copy = await query(`COPY (SELECT 1 AS one) TO '${out}'`);
    expect(copy.code).toBe(1);
    expect(copy.stderr).toContain('use --write to allow that');
    expect(existsSync(out)).toBe(false);
    const drop = await query('DROP TABLE main.events');
    expect(drop.code).toBe(1);
    // The database read back in this process (a command each was ~2 s of start-up for the same read).
    expect(await readOnly('SELECT count(*) AS n FROM main.events')).toEqual([{ n: String(MESSAGES) }]);

    expect((await query(`COPY (SELECT 1 AS one) TO '${out}'`, '--write')).code).toBe(0);
    expect(readFileSync(out, 'utf8')).toBe('one\n1\n');
    expect((await query('DROP TABLE main.events', '--write')).code).toBe(0);
    await expect(readOnly('SELECT count(*) FROM main.events')).rejects.toThrow('Table with name events does not exist');
    // The views over the exported objects do not depend on the table.
    expect(await readOnly('SELECT count(*) AS n FROM to_files')).toEqual([{ n: String(MESSAGES) }]);
  }, 120_000);

  it('on a job without a DuckDB database: an empty in-memory one, with the same limits', async () => {
    const bare = join(dir.path, 'bare.yaml');
    writeFileSync(bare, stringify({ dataDir: './bare-data', topics: [{ name: 'events' }] }));
    // Several statements run in order; the answer is the last one's (it had been the first SELECT's). One
    // command for both checks (each starts a process, ~2 s on a loaded machine).
    const several = await orderly(
      'query',
      bare,
      'SELECT 1 AS first; CREATE TEMP TABLE t AS SELECT 2 AS n; SELECT n AS last FROM t',
      '--json',
    );
    expect(JSON.parse(several.stdout)).toEqual([{ last: 2 }]);
    const out = join(dir.path, 'bare.csv');
    const refused = await orderly('query', bare, `COPY (SELECT 1) TO '${out}'`);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('file system operations are disabled by configuration');
    expect(existsSync(out)).toBe(false);
    expect(existsSync(join(dir.path, 'bare-data', 'query.duckdb'))).toBe(false);
  }, 120_000);

  it('a database that cannot be opened (a directory at duckdb.path) is named, as status and audit name it', async () => {
    const path = join(dir.path, 'not-a-database');
    mkdirSync(path);
    const broken = join(dir.path, 'broken.yaml');
    writeFileSync(broken, stringify({ dataDir: './broken-data', duckdb: { path }, topics: [{ name: 'events' }] }));
    const r = await orderly('query', broken, 'SELECT 1');
    // DuckDB's "IO Error: Could not read from file ...: Is a directory" had not said which database.
    expect([r.code, r.stderr]).toEqual([1, expect.stringMatching(new RegExp(`^orderly: cannot open DuckDB database ${path}: IO Error`))]);
  }, 60_000);

  it('says why a text or Avro subscription has no view when a query names it', async () => {
    const file = join(dir.path, 'avro.yaml');
    const files = (name: string, format: Record<string, unknown>) => ({
      name,
      topic: 'events',
      cloudStorageConfig: { bucket: 'files', filenamePrefix: `${name}/`, ...format },
    });
    const subscriptions = [files('to-avro', { avroConfig: { writeMetadata: true } }), files('to-text', {})];
    writeFileSync(
      file,
      stringify({
        dataDir: './avro-data',
        objectStorage: { embedded: true, buckets: ['files'] },
        topics: [{ name: 'events' }],
        subscriptions,
      }),
    );
    // A read-only query takes the data directory as it stands: status creates the file's subscriptions.
    expect((await orderly('status', file)).code).toBe(0);
    const avro = await orderly('query', file, 'SELECT count(*) FROM to_avro');
    expect(avro.code).toBe(1);
    // It said only: Table with name to_avro does not exist! Did you mean "pg_proc"?
    expect(avro.stderr).toContain(
      'projects/orderly-local/subscriptions/to-avro: its objects are Avro files (avroConfig): orderly query has views of Parquet exports only (parquetConfig)',
    );
    expect(avro.stderr).toContain('projects/orderly-local/subscriptions/to-text: its objects are text files (textConfig)');
    expect((await orderly('query', file, 'SELECT 42 AS answer', '--json')).stdout).toBe('[\n  {\n    "answer": 42\n  }\n]\n');
  }, 120_000);

  it('streams an answer larger than the heap: --json prints every row, the table the first 10,000 and a note of the rest', async () => {
    const bare = join(dir.path, 'big.yaml');
    writeFileSync(bare, stringify({ dataDir: './big-data', topics: [{ name: 'events' }] }));
    const rows = 1_000_000;
    const sql = `SELECT i::INTEGER AS i, repeat('x', 100) AS pad FROM range(${rows}) t(i)`;
    // A 128 MiB heap: the whole answer as objects and then as one JSON string needs several times that (it
    // crashed with V8's out-of-memory trace, as an answer of tens of millions of rows did at any heap size).
    const run = (...flags: string[]) =>
      promisify(execFile)(process.execPath, ['--max-old-space-size=128', orderlyBin, 'query', bare, sql, ...flags], {
        encoding: 'utf8',
        maxBuffer: 1024 * 1024 * 1024,
        timeout: 120_000,
      });
    const json = await run('--json');
    const parsed = JSON.parse(json.stdout) as { i: number; pad: string }[];
    expect(parsed).toHaveLength(rows);
    expect(parsed[rows - 1]).toEqual({ i: rows - 1, pad: 'x'.repeat(100) });
    // A query that fails part way fails whole: no row printed, only the error, exit 1 (a DuckDB stream ends quietly at its error).
    const failing = await orderly(
      'query',
      bare,
      "SELECT CASE WHEN i > 500000 THEN error('boom') ELSE i END AS x FROM range(1000000) t(i)",
      '--json',
    );
    expect(failing).toMatchObject({ code: 1, stderr: 'orderly: Invalid Input Error: boom\n' });
    expect(JSON.parse(failing.stdout)).toEqual({ error: { code: 'UNKNOWN', message: 'Invalid Input Error: boom' } });
    const table = await run();
    expect(table.stdout).toMatch(/│ 9999 +│ x{100} │\n└[─┴]+┘\n\(1000000 rows\)\n$/);
    expect(table.stdout).not.toContain('│ 10000 ');
    expect(table.stderr).toBe(
      `orderly: note: the table shows the first 10000 rows; ${rows - 10_000} more not shown (narrow the query, or use --json for every row)\n`,
    );
  }, 240_000);

  it("runs within the job's DuckDB memory and threads (memory.duckdb, memory.duckdbThreads), with or without a database", async () => {
    const memory = { duckdb: '48MiB', duckdbThreads: 1 };
    const withDatabase = join(dir.path, 'limited.yaml');
    const limited = { dataDir: './limited-data', duckdb: { path: './limited-data/db.duckdb' }, memory, topics: [{ name: 'events' }] };
    writeFileSync(withDatabase, stringify(limited));
    expect((await orderly('query', withDatabase, 'CREATE TABLE t AS SELECT 1 AS one', '--write')).code).toBe(0);
    const bare = join(dir.path, 'bare-limited.yaml');
    writeFileSync(bare, stringify({ dataDir: './bare-data', memory, topics: [{ name: 'events' }] }));
    const sql = "SELECT current_setting('memory_limit') AS memory, current_setting('threads')::VARCHAR AS threads";
    for (const file of [withDatabase, bare]) {
      const r = await orderly('query', file, sql, '--json');
      expect(r.stderr).toBe('');
      expect(JSON.parse(r.stdout)).toEqual([{ memory: '48.0 MiB', threads: '1' }]);
    }
  }, 120_000);
});
