import { GetObjectCommand } from '@aws-sdk/client-s3';
import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { ExportTarget, QueryView } from '../../src/connector/capabilities.js';
import { pathSegment, subscriptionDir } from '../../src/connector/sink-paths.js';
import { quoteString } from '../../src/duckdb/sql.js';
import { writeFileAtomic } from '../../src/store/durable-file.js';
import type { ObjectStorageConfig } from './config.js';
import { Manifest } from './manifest.js';
import { manifestPath } from './object-writer.js';
import { createS3Client, s3Connection } from './s3-client.js';

/**
 * The `orderly query` view of a Parquet subscription: its committed objects, with their file names and
 * row numbers. DuckDB's S3 extension cannot be downloaded here, so the objects are read through a local
 * cache (cacheObjects). Text and Avro subscriptions have no view.
 */
export async function parquetView(target: ExportTarget<ObjectStorageConfig>): Promise<QueryView | undefined> {
  if (target.config.format.kind !== 'parquet') return undefined;
  const files = await cacheObjects(target);
  return {
    files,
    select: files.length ? `SELECT * FROM read_parquet([${files.map(quoteString).join(', ')}], filename = true, file_row_number = true)` : 'SELECT NULL AS data WHERE false',
  };
}

/**
 * The subscription's committed objects as local files, under `<dataDir>/cache/<project>/<id>/<uid>/<bucket>/`,
 * one file per object named by the escaped object name (names map to paths one to one: see pathSegment).
 */
async function cacheObjects(target: ExportTarget<ObjectStorageConfig>): Promise<string[]> {
  const { dataDir } = target.settings;
  const subscription = { name: target.subscription, uid: target.identity.uid };
  const dir = subscriptionDir(join(dataDir, 'cache'), subscription);
  const manifest = Manifest.readOnly(manifestPath(dataDir, subscription));
  const s3 = createS3Client(s3Connection(target.settings.objectStorage as Record<string, unknown> | undefined));
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
