/**
 * Object-storage export: publish -> objects committed on S3 (s3rver on 127.0.0.1 in its own process, or
 * MinIO: see s3-endpoint.ts), 1 KB JSON messages over 10,000 keys, Parquet (with metadata) and text.
 * Baselines: the same rows written straight to one Parquet (or text) file by DuckDB's COPY ... TO, plus
 * one PutObject, in the same run, warm and best of several runs.
 */
import { PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { DuckDBInstance, timestampValue } from '@duckdb/node-api';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { registerBuiltInConnectors } from '../connectors/index.js';
import { createS3Client, s3Connection } from '../connectors/object-storage/s3-client.js';
import { ExportManager } from '../src/connector/export-manager.js';
import { PubSubCore } from '../src/core/pubsub-core.js';
import { createLogger } from '../src/log.js';
import { SqliteStore } from '../src/store/sqlite-store.js';
import { tempDir } from '../test/helpers/temp-dir.js';
import { best, ratioTable, time, warm, type BenchOutput } from './report.js';
import { startBenchS3, type BenchS3 } from './s3-endpoint.js';
import { drainExport, KEYS, MESSAGES, payload, publishAll, publishBatches } from './workload.js';

/** Samples RSS while `fn` runs; returns the peak in MiB. */
async function peakRss<T>(fn: () => Promise<T>): Promise<[T, number]> {
  let peak = process.memoryUsage().rss;
  const timer = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
  try {
    return [await fn(), Math.round(peak / 1024 / 1024)];
  } finally {
    clearInterval(timer);
  }
}

type BaselineFormat = 'parquet' | 'text';

/** What the baseline runs keep warm between them: the DuckDB instance, the rows, the S3 client and bucket. */
interface Baseline {
  instance: DuckDBInstance;
  rows: Buffer[];
  client: S3Client;
  bucket: string;
}

async function openBaseline(s3: BenchS3): Promise<Baseline & { close(): void }> {
  const instance = await DuckDBInstance.create(':memory:');
  const client = createS3Client(s3Connection(s3.settings));
  const rows = Array.from({ length: MESSAGES }, (_, i) => Buffer.from(payload(i)));
  return {
    instance,
    rows,
    client,
    bucket: await s3.bucket(),
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

async function exportObjects(s3: BenchS3, cloudStorageConfig: Record<string, unknown>): Promise<number> {
  registerBuiltInConnectors();
  const dir = tempDir('orderly-bench-');
  const bucket = await s3.bucket();
  const core = await PubSubCore.open({ store: SqliteStore.open(join(dir.path, 'store')), tickMs: 50 });
  const exports = new ExportManager({
    core,
    settings: { dataDir: dir.path, objectStorage: s3.settings },
    logger: createLogger({ level: 'warn' }),
  });
  try {
    await core.createTopic('bench');
    await core.createSubscription('to-s3', {
      topic: 'bench',
      enableMessageOrdering: true,
      cloudStorageConfig: { bucket, ...cloudStorageConfig },
    });
    await exports.sync();
    await exports.runner('to-s3')!.ready;
    const batches = publishBatches();
    const seconds = await time(async () => {
      await publishAll(core, 'bench', batches);
      await drainExport(exports, 'to-s3', MESSAGES);
    });
    return MESSAGES / seconds;
  } finally {
    await exports.stop();
    await core.close();
    dir.remove();
  }
}

export async function benchObjectExport(): Promise<BenchOutput> {
  const s3 = await startBenchS3();
  const baseline = await openBaseline(s3);
  try {
    const [parquetBaseline, parquetBaselineMb] = await peakRss(() => best(() => duckdbCopyPut(baseline, 'parquet')));
    const [textBaseline, textBaselineMb] = await peakRss(() => best(() => duckdbCopyPut(baseline, 'text')));
    const [parquetRate, parquetMb] = await warm(() => peakRss(() => exportObjects(s3, { parquetConfig: { writeMetadata: true } })));
    const [textRate, textMb] = await warm(() => peakRss(() => exportObjects(s3, { textConfig: {} })));
    const rss = (mb: number) => `peak RSS ${mb} MiB`;
    return ratioTable([
      {
        name: 'DuckDB COPY TO parquet + PutObject (baseline: warm, best of runs)',
        perSecond: parquetBaseline,
        baseline: parquetBaseline,
        extra: rss(parquetBaselineMb),
      },
      {
        name: 'publish -> Parquet objects committed',
        perSecond: parquetRate,
        baseline: parquetBaseline,
        minRatio: 0.5,
        extra: rss(parquetMb),
      },
      {
        name: 'DuckDB COPY TO text + PutObject (baseline: warm, best of runs)',
        perSecond: textBaseline,
        baseline: textBaseline,
        extra: rss(textBaselineMb),
      },
      { name: 'publish -> text objects committed', perSecond: textRate, baseline: textBaseline, minRatio: 0.5, extra: rss(textMb) },
    ]);
  } finally {
    baseline.close();
    await s3.close();
  }
}
