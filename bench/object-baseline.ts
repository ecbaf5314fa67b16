/**
 * The object export's baselines (bench/object-export.ts), in a process of their own: the same rows written
 * straight to one Parquet (or text) file by DuckDB's COPY ... TO plus one PutObject, warm and best of
 * several runs. Their own process because the export's runs in the environment `orderly` sets
 * (bin/process-env.json), whose DuckDB allocator setting (freed pages returned at once, for the drains'
 * memory) slowed DuckDB's own COPY ~4x: a baseline is measured at its best, with DuckDB's defaults.
 */
import { PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { DuckDBInstance, timestampValue } from '@duckdb/node-api';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createS3Client, s3Connection } from '../connectors/object-storage/s3-client.js';
import { tempDir } from '../test/helpers/temp-dir.js';
import { exitWithParent, reply } from './child.js';
import { best, peakRss, time } from './report.js';
import { KEYS, MESSAGES, payload } from './workload.js';

type BaselineFormat = 'parquet' | 'text';

/** What the baseline runs keep warm between them: the DuckDB instance, the rows, the S3 client and bucket. */
interface Baseline {
  instance: DuckDBInstance;
  rows: Buffer[];
  client: S3Client;
  bucket: string;
}

async function openBaseline(s3: BaselineS3): Promise<Baseline & { close(): void }> {
  const instance = await DuckDBInstance.create(':memory:');
  const client = createS3Client(s3Connection(s3.settings));
  const rows = Array.from({ length: MESSAGES }, (_, i) => Buffer.from(payload(i)));
  return {
    instance,
    rows,
    client,
    bucket: s3.bucket,
    close() {
      client.destroy();
      instance.closeSync();
    },
  };
}

/**
 * The raw write path an object export competes with: the same rows appended to DuckDB, written to one file
 * by DuckDB's COPY ... TO (Parquet with metadata and SNAPPY as the export writes it, or text: one payload per
 * line), and uploaded with one PutObject to the same S3 server.
 */
async function duckdbCopyPut({ instance, rows, client, bucket }: Baseline, format: BaselineFormat): Promise<number> {
  const dir = tempDir('orderly-bench-');
  const connection = await instance.connect();
  try {
    await connection.run(`CREATE OR REPLACE TABLE t(subscription_name VARCHAR, message_id VARCHAR, publish_time TIMESTAMP, attributes VARCHAR,
      data BLOB, ordering_key VARCHAR, sequence BIGINT)`);
    const file = join(dir.path, `baseline.${format}`);
    const copy =
      format === 'parquet'
        ? `COPY t TO '${file}' (FORMAT parquet, COMPRESSION snappy)`
        : // Raw lines: no header, no quoting or escaping, a delimiter that never occurs (one column anyway).
          `COPY (SELECT decode(data) FROM t) TO '${file}' (FORMAT csv, HEADER false, QUOTE '', ESCAPE '', DELIMITER '\x01')`;
    const seconds = await time(async () => {
      const appender = await connection.createAppender('t');
      const now = timestampValue(BigInt(Date.now()) * 1000n);
      rows.forEach((data, i) => {
        appender.appendVarchar('projects/bench/subscriptions/s');
        appender.appendVarchar(String(i + 1));
        appender.appendTimestamp(now);
        appender.appendVarchar('{}');
        appender.appendBlob(data);
        appender.appendVarchar(`key-${i % KEYS}`);
        appender.appendBigInt(BigInt(Math.floor(i / KEYS) + 1));
        appender.endRow();
      });
      appender.closeSync();
      await connection.run(copy);
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: `baseline.${format}`, Body: readFileSync(file) }));
    });
    return MESSAGES / seconds;
  } finally {
    connection.closeSync();
    dir.remove();
  }
}

/** Where the baselines upload: the benchmark's S3 server and bucket. */
export interface BaselineS3 {
  settings: Record<string, unknown>;
  bucket: string;
}

/** msgs/s and peak RSS (MiB) of each baseline. */
export interface BaselineRates {
  parquet: [number, number];
  text: [number, number];
}

exitWithParent();
const s3 = JSON.parse(process.argv[2]!) as BaselineS3;
const baseline = await openBaseline(s3);
try {
  const rates: BaselineRates = {
    parquet: await peakRss(() => best(() => duckdbCopyPut(baseline, 'parquet'))),
    text: await peakRss(() => best(() => duckdbCopyPut(baseline, 'text'))),
  };
  await reply(rates);
} finally {
  baseline.close();
}
process.exit(0);
