import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadJob } from '../../src/job/job-config.js';
import { JobRuntime } from '../../src/job/job-runtime.js';
import { createLogger } from '../../src/log.js';
import { orderly } from '../helpers/cli.js';
import { tempDir } from '../helpers/core.js';
import { waitFor } from '../helpers/export.js';

const MESSAGES = 40;
let dir: ReturnType<typeof tempDir>;
let job: string;
let database: string;

/** The query's rows (--json), or the failure's stderr. */
async function query(sql: string, ...flags: string[]): Promise<{ rows?: Record<string, unknown>[]; code: number; stderr: string }> {
  const r = await orderly('query', job, sql, '--json', ...flags);
  return { rows: r.code === 0 ? JSON.parse(r.stdout) : undefined, code: r.code, stderr: r.stderr };
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
      duckdb: { path: './data/db.duckdb', init: ['CREATE TABLE IF NOT EXISTS events(subscription_name VARCHAR, message_id VARCHAR, publish_time TIMESTAMP, data VARCHAR, attributes JSON)'] },
      objectStorage: { embedded: true, buckets: ['files'] },
      topics: [{ name: 'events' }],
      subscriptions: [
        { name: 'to-table', topic: 'events', bigqueryConfig: { table: 'query-test.main.events', writeMetadata: true } },
        { name: 'to-files', topic: 'events', cloudStorageConfig: { bucket: 'files', parquetConfig: { writeMetadata: true } } },
      ],
    }),
  );
  const runtime = await JobRuntime.start(loadJob(job), createLogger());
  await runtime.core.publish('events', Array.from({ length: MESSAGES }, (_, i) => ({ data: `m${i}` })));
  await waitFor('the table export', () => runtime.exports.runner('to-table')!.stats.written === MESSAGES, 30_000);
  await waitFor('the file export to buffer', () => runtime.exports.runner('to-files')!.outstanding === MESSAGES, 30_000);
  await runtime.stop(); // finalizes the open file
}, 120_000);
afterAll(() => dir.remove());

describe('orderly query is read-only unless --write', () => {
  it('reads the table and the Parquet view, and leaves the database file byte for byte as it was', async () => {
    const before = fingerprint(database);
    expect((await query('SELECT count(*) AS n FROM main.events')).rows).toEqual([{ n: String(MESSAGES) }]);
    expect((await query('SELECT count(*) AS n, count(DISTINCT message_id) AS ids FROM to_files')).rows).toEqual([{ n: String(MESSAGES), ids: String(MESSAGES) }]);
    expect(fingerprint(database)).toBe(before);
  }, 120_000);

  it.each<[string, (out: string) => string]>([
    ['COPY ... TO a file', (out) => `COPY (SELECT 1) TO '${out}'`],
    ['COPY the table to a file', (out) => `COPY main.events TO '${out}' (FORMAT csv)`],
    ['a file write that first tries to unlock the configuration', (out) => `SET enable_external_access = true; COPY (SELECT 1) TO '${out}'`],
    ['EXPORT DATABASE', (out) => `EXPORT DATABASE '${out}'`],
  ])('refuses %s', async (_what, statement) => {
    const out = join(dir.path, `out-${Math.random().toString(36).slice(2)}.csv`);
    const r = await query(statement(out));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('orderly query is read-only: it cannot change the database or touch other files; use --write to allow that');
    expect(existsSync(out)).toBe(false);
  }, 120_000);

  it.each<[string, string, string]>([
    ['DROP TABLE', 'DROP TABLE main.events', 'Cannot execute statement of type "DROP"'],
    ['DELETE', 'DELETE FROM main.events', 'read-only mode'],
    ['CREATE TABLE', 'CREATE TABLE stolen AS SELECT 1', 'read-only mode'],
    ['reading a file outside the job', "SELECT * FROM read_csv('/etc/passwd')", 'file system operations are disabled by configuration'],
    ['reading the job file', "SELECT * FROM read_text('<job>')", 'file system operations are disabled by configuration'],
    ['ATTACH', "ATTACH '<dir>/other.duckdb' AS other", 'file system operations are disabled by configuration'],
    ['loading an extension', 'LOAD httpfs', 'disabled through configuration'],
  ])('refuses %s', async (_what, statement, problem) => {
    const before = fingerprint(database);
    const r = await query(statement.replace('<job>', job).replace('<dir>', dir.path));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(problem);
    expect(r.stderr).toContain('use --write to allow that');
    expect(fingerprint(database)).toBe(before);
    expect(existsSync(join(dir.path, 'other.duckdb'))).toBe(false);
  }, 120_000);

  it('with --write, COPY writes the file and DROP TABLE drops the table', async () => {
    const out = join(dir.path, 'copied.csv');
    expect((await query(`COPY (SELECT 1 AS one) TO '${out}'`, '--write')).code).toBe(0);
    expect(readFileSync(out, 'utf8')).toBe('one\n1\n');
    expect((await query('DROP TABLE main.events', '--write')).code).toBe(0);
    const gone = await query('SELECT count(*) FROM main.events');
    expect(gone.code).toBe(1);
    expect(gone.stderr).toContain('Table with name events does not exist');
  }, 120_000);
});

describe('orderly query on a job without a DuckDB database', () => {
  it('runs on an empty in-memory database, with the same limits', async () => {
    const bare = join(dir.path, 'bare.yaml');
    writeFileSync(bare, stringify({ dataDir: './bare-data', topics: [{ name: 'events' }] }));
    const ok = await orderly('query', bare, 'SELECT 42 AS answer', '--json');
    expect(JSON.parse(ok.stdout)).toEqual([{ answer: 42 }]);
    const out = join(dir.path, 'bare.csv');
    const refused = await orderly('query', bare, `COPY (SELECT 1) TO '${out}'`);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('file system operations are disabled by configuration');
    expect(existsSync(out)).toBe(false);
    expect(existsSync(join(dir.path, 'bare-data', 'query.duckdb'))).toBe(false);
  }, 120_000);
});
