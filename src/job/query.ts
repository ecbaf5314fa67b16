import { GetObjectCommand } from '@aws-sdk/client-s3';
import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parseObjectStorageConfig } from '../../connectors/object-storage/config.js';
import { Manifest } from '../../connectors/object-storage/manifest.js';
import { manifestPath } from '../../connectors/object-storage/object-writer.js';
import { createS3Client, s3Connection } from '../../connectors/object-storage/s3-client.js';
import { pathSegment, subscriptionDir } from '../connector/sink-paths.js';
import { shortId } from '../core/names.js';
import { connectDuckDb } from '../duckdb/database.js';
import { quoteIdent, quoteString } from '../duckdb/sql.js';
import { writeFileAtomic } from '../store/durable-file.js';
import type { JobRuntime } from './job-runtime.js';

/**
 * Runs SQL over the job's DuckDB database, with one view per Parquet object-storage subscription
 * (named after the subscription, `-` as `_`) over its committed objects. DuckDB's S3 extension cannot be
 * downloaded here, so the objects are read through a local cache under `<dataDir>/cache/` (cacheObjects).
 */
export async function queryJob(runtime: JobRuntime, sql: string): Promise<Record<string, unknown>[]> {
  const { job, core } = runtime;
  const views: string[] = [];
  for (const sub of core.listSubscriptions()) {
    if (!sub.cloudStorageConfig) continue;
    const config = parseObjectStorageConfig(sub.cloudStorageConfig);
    if (config.format.kind !== 'parquet') continue;
    const files = await cacheObjects(runtime, sub.name);
    const view = quoteIdent(shortId(sub.name).replaceAll('-', '_'));
    views.push(
      files.length
        ? `CREATE OR REPLACE TEMP VIEW ${view} AS SELECT * FROM read_parquet([${files.map(quoteString).join(', ')}], filename = true, file_row_number = true)`
        : `CREATE OR REPLACE TEMP VIEW ${view} AS SELECT NULL AS data WHERE false`,
    );
  }
  const connection = await connectDuckDb(job.duckdb?.path ?? join(job.dataDir, 'query.duckdb'));
  try {
    for (const v of views) await connection.run(v);
    return (await connection.runAndReadAll(sql)).getRowObjectsJson() as Record<string, unknown>[];
  } finally {
    connection.closeSync();
  }
}

/**
 * The subscription's committed objects as local files, under `<dataDir>/cache/<project>/<id>/<uid>/<bucket>/`,
 * one file per object named by the escaped object name (names map to paths one to one: see pathSegment).
 */
async function cacheObjects(runtime: JobRuntime, name: string): Promise<string[]> {
  const subscription = { name, uid: runtime.core.identity(name).uid };
  const dir = subscriptionDir(join(runtime.job.dataDir, 'cache'), subscription);
  const manifest = Manifest.readOnly(manifestPath(runtime.job.dataDir, subscription));
  const s3 = createS3Client(s3Connection(runtime.objectStorage));
  try {
    const files: string[] = [];
    for (const entry of manifest.committed()) {
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
    manifest.close();
    s3.destroy();
  }
}
