/**
 * End-to-end DuckDB export: publish -> rows committed in DuckDB (writeMetadata columns), 1 KB JSON
 * messages over 10,000 ordering keys; ratio against the raw DuckDB appender writing the same rows.
 */
import { join } from 'node:path';
import { registerBuiltInConnectors } from '../connectors/index.js';
import { PubSubCore } from '../src/core/pubsub-core.js';
import { closeDuckDb, connectDuckDb } from '../src/duckdb/database.js';
import { SqliteStore } from '../src/store/sqlite-store.js';
import { tempDir } from '../test/helpers/temp-dir.js';
import { runChild } from './child.js';
import { jobExports } from './job-exports.js';
import { baselineEnv, benchModule } from './paths.js';
import { ratioTable, time, warm, type BenchOutput } from './report.js';
import { EVENTS_TABLE, MESSAGES, publishAll, publishBatches } from './workload.js';

async function endToEnd(): Promise<number> {
  registerBuiltInConnectors();
  const dir = tempDir('orderly-bench-');
  const duckdbPath = join(dir.path, 'export.duckdb');
  const core = await PubSubCore.open({ store: SqliteStore.open(join(dir.path, 'store')), tickMs: 50 });
  const exports = jobExports(core, { dataDir: dir.path, duckdbPath });
  try {
    const connection = await connectDuckDb(duckdbPath);
    await connection.run(EVENTS_TABLE);
    connection.closeSync();
    await core.createTopic('bench');
    await core.createSubscription('to-duckdb', {
      topic: 'bench',
      enableMessageOrdering: true,
      bigqueryConfig: { table: 'bench.main.events', writeMetadata: true },
    });
    await exports.sync();
    await exports.runner('to-duckdb')!.ready;
    const batches = publishBatches(); // built before the clock starts, as for the baseline
    const seconds = await time(async () => {
      await publishAll(core, 'bench', batches);
      const runner = exports.runner('to-duckdb')!;
      while (runner.stats.written < MESSAGES) await new Promise((r) => setTimeout(r, 5));
    });
    return MESSAGES / seconds;
  } finally {
    await exports.stop();
    await core.close();
    await closeDuckDb(duckdbPath);
    dir.remove();
  }
}

export async function benchDuckDbExport(): Promise<BenchOutput> {
  const baseline = await runChild<number>(benchModule('duckdb-baseline'), [], [], baselineEnv());
  const exported = await warm(endToEnd);
  return ratioTable([
    { name: 'raw DuckDB appender (baseline: warm, best of runs)', perSecond: baseline, baseline },
    { name: 'publish -> DuckDB rows committed (exactly-once)', perSecond: exported, baseline, minRatio: 0.5 },
  ]);
}
