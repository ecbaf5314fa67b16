/**
 * Object-storage export: publish -> objects committed on S3 (s3rver on 127.0.0.1 in its own process, or
 * MinIO: see s3-endpoint.ts), 1 KB JSON messages over 10,000 keys, Parquet (with metadata) and text.
 * Baselines: the same rows written straight to one Parquet (or text) file by DuckDB's COPY ... TO, plus
 * one PutObject, in the same run, warm and best of several runs.
 */
import { join } from 'node:path';
import { registerBuiltInConnectors } from '../connectors/index.js';
import { PubSubCore } from '../src/core/pubsub-core.js';
import { SqliteStore } from '../src/store/sqlite-store.js';
import { tempDir } from '../test/helpers/temp-dir.js';
import { runChild } from './child.js';
import { jobExports } from './job-exports.js';
import type { BaselineRates, BaselineS3 } from './object-baseline.js';
import { baselineEnv, benchModule } from './paths.js';
import { peakRss, ratioTable, time, warm, type BenchOutput } from './report.js';
import { startBenchS3, type BenchS3 } from './s3-endpoint.js';
import { drainExport, MESSAGES, publishAll, publishBatches } from './workload.js';

async function exportObjects(s3: BenchS3, cloudStorageConfig: Record<string, unknown>): Promise<number> {
  registerBuiltInConnectors();
  const dir = tempDir('orderly-bench-');
  const bucket = await s3.bucket();
  const core = await PubSubCore.open({ store: SqliteStore.open(join(dir.path, 'store')), tickMs: 50 });
  // As `orderly run` does: a Parquet export's connector declares its own window and heap growth.
  const exports = jobExports(core, { dataDir: dir.path, objectStorage: s3.settings });
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
  try {
    const where: BaselineS3 = { settings: s3.settings, bucket: await s3.bucket() };
    const {
      parquet: [parquetBaseline, parquetBaselineMb],
      text: [textBaseline, textBaselineMb],
    } = await runChild<BaselineRates>(benchModule('object-baseline'), [JSON.stringify(where)], [], baselineEnv());
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
    await s3.close();
  }
}
