import { GetObjectCommand } from '@aws-sdk/client-s3';
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parseObjectStorageConfig } from '../../connectors/object-storage/config.js';
import { readFleetManifest } from '../../connectors/object-storage/bucket-manifest.js';
import { Manifest, type ManifestObject } from '../../connectors/object-storage/manifest.js';
import { manifestView } from '../../connectors/object-storage/manifest-view.js';
import { manifestPath } from '../../connectors/object-storage/object-writer.js';
import { createS3Client, s3Connection } from '../../connectors/object-storage/s3-client.js';
import { pathSegment, subscriptionDir } from '../connector/sink-paths.js';
import { OrderlyError } from '../core/errors.js';
import { shortId } from '../core/names.js';
import { connectDuckDb } from '../duckdb/database.js';
import { quoteIdent, quoteString } from '../duckdb/sql.js';
import { writeFileAtomic } from '../store/durable-file.js';
import type { JobRuntime } from './job-runtime.js';
import { findRemoteExport } from './remote-job.js';

/**
 * How a query reaches the job's DuckDB database:
 * - `read-only` (`orderly query`): its own read-only instance of `duckdbPath`, locked down so the SQL can
 *   neither change the database nor read or write any file but the database and the views' cached objects.
 *   Nothing else in the process may have that file open (a second instance of a file in one process sees
 *   stale data).
 * - `shared` (`orderly query --write`, the demo): the process's read-write instance, which exports may be
 *   writing through at the same time; the SQL can do anything DuckDB can.
 */
export type QueryAccess = { mode: 'read-only'; duckdbPath: string | undefined } | { mode: 'shared' };

/**
 * Runs SQL over the job's DuckDB database, with one view per Parquet object-storage subscription
 * (named after the subscription, `-` as `_`) over its committed objects. DuckDB's S3 extension cannot be
 * downloaded here, so the objects are read through a local cache under `<dataDir>/cache/` (cacheObjects).
 */
export async function queryJob(runtime: JobRuntime, sql: string, access: QueryAccess = { mode: 'shared' }): Promise<Record<string, unknown>[]> {
  const { job, core } = runtime;
  const views: string[] = [];
  const files: string[] = [];
  for (const sub of core.listSubscriptions()) {
    if (!sub.cloudStorageConfig) continue;
    const config = parseObjectStorageConfig(sub.cloudStorageConfig);
    if (config.format.kind !== 'parquet') continue;
    const subscription = { name: sub.name, uid: runtime.core.identity(sub.name).uid };
    const manifest = Manifest.readOnly(manifestPath(runtime.job.dataDir, subscription));
    const cached = await cacheObjects(runtime, subscription, manifest.committed()).finally(() => manifest.close());
    files.push(...cached);
    views.push(parquetView(sub.name, cached, []));
  }
  // A fleet's exports (remote subscriptions): every worker's objects, from the manifest in the bucket, each
  // message once (records a copy in an earlier object supersedes are left out: see manifestView).
  for (const e of job.remote?.exports ?? []) {
    if (!e.cloudStorageConfig) continue;
    const config = parseObjectStorageConfig(e.cloudStorageConfig);
    if (config.format.kind !== 'parquet') continue;
    const { subscription, identity } = findRemoteExport(job, e.subscription);
    const target = { name: subscription, uid: identity.uid };
    const s3 = createS3Client(s3Connection(runtime.objectStorage));
    const view = manifestView(await readFleetManifest(s3, config.bucket, target).finally(() => s3.destroy()));
    const cached = await cacheObjects(runtime, target, view.objects.map((o) => o.entry));
    files.push(...cached);
    const superseded = view.objects.flatMap((o, i) => o.counts.flatMap((counts, row) => (counts ? [] : [[cached[i]!, row] as const])));
    views.push(parquetView(subscription, cached, superseded));
  }
  const ownDatabase = join(job.dataDir, 'query.duckdb');
  if (access.mode === 'shared') {
    const connection = await connectDuckDb(job.duckdb?.path ?? ownDatabase);
    try {
      return await runWithViews(connection, views, sql);
    } finally {
      connection.closeSync();
    }
  }
  const path = access.duckdbPath ?? ownDatabase;
  // A database not created yet has no tables to read; the views still work on an empty in-memory one.
  const instance = existsSync(path) ? await DuckDBInstance.create(path, { access_mode: 'READ_ONLY' }) : await DuckDBInstance.create(':memory:');
  try {
    const connection = await instance.connect();
    try {
      await lockDown(connection, files);
      return await runWithViews(connection, views, sql);
    } catch (e) {
      const message = (e as Error).message;
      if (/read-only mode|file system operations are disabled|configuration has been locked|disabled through configuration/.test(message)) {
        throw new OrderlyError('FAILED_PRECONDITION', `${message}\n(orderly query is read-only: it cannot change the database or touch other files; use --write to allow that)`);
      }
      throw e;
    } finally {
      connection.closeSync();
    }
  } finally {
    instance.closeSync();
  }
}

/**
 * A view named after the subscription (`-` as `_`) over its cached Parquet objects, without the records
 * `superseded` names (file, row).
 */
function parquetView(subscription: string, files: string[], superseded: (readonly [string, number])[]): string {
  const view = quoteIdent(shortId(subscription).replaceAll('-', '_'));
  if (!files.length) return `CREATE OR REPLACE TEMP VIEW ${view} AS SELECT NULL AS data WHERE false`;
  const read = `SELECT * FROM read_parquet([${files.map(quoteString).join(', ')}], filename = true, file_row_number = true)`;
  if (!superseded.length) return `CREATE OR REPLACE TEMP VIEW ${view} AS ${read}`;
  const rows = superseded.map(([file, row]) => `(${quoteString(file)}, ${row})`).join(', ');
  return `CREATE OR REPLACE TEMP VIEW ${view} AS SELECT * FROM (${read}) AS r WHERE NOT EXISTS (SELECT 1 FROM (VALUES ${rows}) AS s(f, n) WHERE s.f = r.filename AND s.n = r.file_row_number)`;
}

async function runWithViews(connection: DuckDBConnection, views: string[], sql: string): Promise<Record<string, unknown>[]> {
  for (const v of views) await connection.run(v);
  return (await connection.runAndReadAll(sql)).getRowObjectsJson() as Record<string, unknown>[];
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

/**
 * The subscription's committed objects as local files, under `<dataDir>/cache/<project>/<id>/<uid>/<bucket>/`,
 * one file per object named by the escaped object name (names map to paths one to one: see pathSegment).
 */
async function cacheObjects(runtime: JobRuntime, subscription: { name: string; uid: string }, entries: ManifestObject[]): Promise<string[]> {
  const dir = subscriptionDir(join(runtime.job.dataDir, 'cache'), subscription);
  const s3 = createS3Client(s3Connection(runtime.objectStorage));
  try {
    const files: string[] = [];
    for (const entry of entries) {
      const file = join(dir, pathSegment(entry.bucket), pathSegment(entry.object));
      if (!existsSync(file)) {
        const res = await s3.send(new GetObjectCommand({ Bucket: entry.bucket, Key: entry.object }));
        mkdirSync(dirname(file), { recursive: true });
        // Whole or not at all: a cached file cut short by a crash would be read as the object.
        writeFileAtomic(file, await res.Body!.transformToByteArray(), { sync: false });
      }
      files.push(file);
    }
    return files;
  } finally {
    s3.destroy();
  }
}
