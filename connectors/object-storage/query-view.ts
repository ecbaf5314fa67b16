import { GetObjectCommand } from '@aws-sdk/client-s3';
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { ExportTarget, QueryView } from '../../src/connector/capabilities.js';
import { pathSegment, subscriptionDir } from '../../src/connector/sink-paths.js';
import { quoteString } from '../../src/duckdb/sql.js';
import { writeFileAtomic } from '../../src/store/durable-file.js';
import { readFleetManifest } from './bucket-manifest.js';
import type { ObjectStorageConfig } from './config.js';
import type { ManifestObject } from './manifest.js';
import { ManifestReader } from './manifest-reader.js';
import { manifestView } from './manifest-view.js';
import { manifestPath } from './object-writer.js';
import { parquetColumns } from './parquet-file.js';
import { createS3Client, s3Connection } from './s3-client.js';

/**
 * The `orderly query` view of a Parquet subscription: its committed Parquet objects (not those of a format
 * it had before), with their file names and row numbers. DuckDB's S3 extension cannot be downloaded here,
 * so the objects are read through a local cache (cacheObjects).
 * A fleet's export (`target.shared`) is read from the manifest in the bucket — every worker's objects —
 * without the records the manifest view leaves out (a copy of a message an earlier object holds: see
 * manifestView), by file and row. A text or Avro subscription has none: it is refused, saying so.
 */
export async function parquetView(target: ExportTarget<ObjectStorageConfig>): Promise<QueryView | undefined> {
  // Said when a query names the view it does not have (it had answered only "Table ... does not exist!
  // Did you mean "pg_proc"?").
  const { kind } = target.config.format;
  if (kind !== 'parquet')
    throw new Error(
      `its objects are ${kind === 'avro' ? 'Avro' : 'text'} files (${kind}Config): orderly query has views of Parquet exports only (parquetConfig)`,
    );
  const all = target.shared ? await fleetEntries(target) : localEntries(target);
  // Objects written before the subscription's format changed to Parquet are not Parquet files.
  const kept = all.entries.flatMap((entry, i) => (entry.format === 'parquet' ? [i] : []));
  const entries = kept.map((i) => all.entries[i]!);
  const superseded = kept.map((i) => all.superseded[i]!);
  const others = all.entries.filter((entry) => entry.format !== 'parquet');
  const leftOut = others.length
    ? `${others.length} object(s) holding ${others.reduce((n, e) => n + e.records, 0)} records in another format ` +
      `(${[...new Set(others.map((e) => e.format))].join(', ')}) are not in the view: written before the subscription's format ` +
      'changed, or by a worker whose job file gives another format'
    : undefined;
  const files = await cacheObjects(target, entries);
  // No object yet: no rows, but the columns its objects will have, so a query written for them answers
  // nothing rather than failing ("column ordering_key not found").
  if (!files.length) {
    const columns = [...parquetColumns(target.config.format.writeMetadata), ['file_row_number', 'BIGINT'], ['filename', 'VARCHAR']];
    return { files, select: `SELECT ${columns.map(([name, type]) => `NULL::${type} AS ${name}`).join(', ')} WHERE false`, leftOut };
  }
  // By name: files written with and without writeMetadata have different columns.
  const read = `SELECT * FROM read_parquet([${files.map(quoteString).join(', ')}], filename = true, file_row_number = true, union_by_name = true)`;
  const left = superseded.flatMap((rows, i) => rows.map((row) => `(${quoteString(files[i]!)}, ${row})`));
  if (!left.length) return { files, select: read, leftOut };
  return {
    files,
    select: `SELECT * FROM (${read}) AS r WHERE NOT EXISTS (SELECT 1 FROM (VALUES ${left.join(', ')}) AS s(f, n) WHERE s.f = r.filename AND s.n = r.file_row_number)`,
    leftOut,
  };
}

/** An object of the view: what reading it needs. */
type ViewedObject = Pick<ManifestObject, 'object' | 'bucket' | 'format' | 'bytes' | 'records'>;

/**
 * The subscription's committed objects from the manifest under the job's data directory: their names and
 * sizes, not their entries' per-key ranges, which the view does not use (see ManifestReader).
 */
function localEntries(target: ExportTarget<ObjectStorageConfig>): { entries: ViewedObject[]; superseded: number[][] } {
  const manifest = new ManifestReader(manifestPath(target.settings.dataDir, { name: target.subscription, uid: target.identity.uid }));
  try {
    const entries = manifest.committed();
    return { entries, superseded: entries.map(() => []) };
  } finally {
    manifest.close();
  }
}

/** A fleet's committed objects from the manifest in the bucket, with the rows of each that the view leaves out. */
async function fleetEntries(target: ExportTarget<ObjectStorageConfig>): Promise<{ entries: ViewedObject[]; superseded: number[][] }> {
  const s3 = createS3Client(s3Connection(target.settings.objectStorage as Record<string, unknown> | undefined));
  try {
    const view = manifestView(await readFleetManifest(s3, target.config.bucket, { name: target.subscription, uid: target.identity.uid }));
    return {
      entries: view.objects.map((o) => o.entry),
      superseded: view.objects.map((o) => o.counts.flatMap((counts, row) => (counts ? [] : [row]))),
    };
  } finally {
    s3.destroy();
  }
}

/**
 * The subscription's committed objects as local files, under `<dataDir>/cache/<project>/<id>/<uid>/<bucket>/`,
 * one file per object named by the escaped object name (names map to paths one to one: see pathSegment).
 */
async function cacheObjects(target: ExportTarget<ObjectStorageConfig>, entries: ViewedObject[]): Promise<string[]> {
  const { dataDir } = target.settings;
  const subscription = { name: target.subscription, uid: target.identity.uid };
  const dir = subscriptionDir(join(dataDir, 'cache'), subscription);
  const s3 = createS3Client(s3Connection(target.settings.objectStorage as Record<string, unknown> | undefined));
  try {
    const files: string[] = [];
    for (const entry of entries) {
      const file = join(dir, pathSegment(entry.bucket), pathSegment(entry.object));
      // A copy of another size than the object the manifest lists (cut short, or overwritten since) is not
      // the object: it is fetched again rather than read as it.
      if (!existsSync(file) || statSync(file).size !== entry.bytes) {
        // The SDK's own message names neither the object nor the bucket ("The specified key does not exist.").
        const body = await s3
          .send(new GetObjectCommand({ Bucket: entry.bucket, Key: entry.object }))
          .then((res) => res.Body!.transformToByteArray())
          .catch((e: unknown) => {
            const why = (e as Error).name === 'NoSuchKey' ? 'it is missing from the bucket' : (e as Error).message;
            throw new Error(`cannot read ${entry.object} from bucket ${entry.bucket}: ${why}`, { cause: e });
          });
        // An object written over since it was committed (a user's upload under its name) is not what the
        // manifest lists: read as it, its rows went into the view silently, metadata columns NULL.
        if (body.length !== entry.bytes)
          throw new Error(
            `cannot read ${entry.object} from bucket ${entry.bucket}: it is ${body.length} bytes, the manifest lists ${entry.bytes} ` +
              '(written over since it was exported; orderly audit reports it)',
          );
        mkdirSync(dirname(file), { recursive: true });
        // Whole or not at all: a cached file cut short by a crash would be read as the object.
        writeFileAtomic(file, body, { sync: false });
      }
      files.push(file);
    }
    return files;
  } finally {
    s3.destroy();
  }
}
