/**
 * End-to-end DuckDB export: publish -> rows committed in DuckDB (writeMetadata columns), 1 KB JSON
 * messages over 10,000 ordering keys; ratio against the raw DuckDB appender writing the same rows.
 */
import { DuckDBInstance, timestampValue } from '@duckdb/node-api';
import { join } from 'node:path';
import { registerBuiltInConnectors } from '../connectors/index.js';
import { ExportManager } from '../src/connector/export-manager.js';
import { PubSubCore } from '../src/core/pubsub-core.js';
import { CHECKPOINT_THRESHOLD, closeDuckDb, connectDuckDb, duckDbSettings } from '../src/duckdb/database.js';
import { createLogger } from '../src/log.js';
import { SqliteStore } from '../src/store/sqlite-store.js';
import { tempDir } from '../test/helpers/temp-dir.js';
import { best, ratioTable, time, warm, type BenchOutput } from './report.js';
import { KEYS, MESSAGES, payload, publishAll, publishBatches } from './workload.js';

/** The export's target table (writeMetadata columns plus ordering_key/sequence). */
export const EVENTS_TABLE = `CREATE TABLE events(subscription_name VARCHAR, message_id VARCHAR, publish_time TIMESTAMP, data JSON,
  attributes JSON, ordering_key VARCHAR, sequence BIGINT)`;

/**
 * The baseline as fast as DuckDB goes: the file opened directly, with DuckDB's own row groups (Orderly
 * attaches its export databases with smaller ones, which makes one large append slower), Orderly's
 * threads and checkpoint threshold, and the larger of its two memory limits (memory.duckdb, not the table
 * exports' memory.duckdbTables, under which one large append runs slower).
 */
async function rawAppender(): Promise<number> {
  const dir = tempDir('orderly-bench-');
  const path = join(dir.path, 'raw.duckdb');
  const instance = await DuckDBInstance.create(path, duckDbSettings('other', { checkpoint_threshold: CHECKPOINT_THRESHOLD }));
  try {
    const connection = await instance.connect();
    await connection.run(EVENTS_TABLE);
    const rows = Array.from({ length: MESSAGES }, (_, i) => payload(i));
    const seconds = await time(async () => {
      const appender = await connection.createAppender('events');
      const now = BigInt(Date.now()) * 1000n;
      rows.forEach((data, i) => {
        appender.appendVarchar('projects/bench/subscriptions/s');
        appender.appendVarchar(String(i + 1));
        appender.appendTimestamp(timestampValue(now));
        appender.appendVarchar(data);
        appender.appendVarchar('{}');
        appender.appendVarchar(`key-${i % KEYS}`);
        appender.appendBigInt(BigInt(Math.floor(i / KEYS) + 1));
        appender.endRow();
      });
      appender.closeSync();
    });
    connection.closeSync();
    return MESSAGES / seconds;
  } finally {
    instance.closeSync();
    dir.remove();
  }
}

async function endToEnd(): Promise<number> {
  registerBuiltInConnectors();
  const dir = tempDir('orderly-bench-');
  const duckdbPath = join(dir.path, 'export.duckdb');
  const core = await PubSubCore.open({ store: SqliteStore.open(join(dir.path, 'store')), tickMs: 50 });
  const exports = new ExportManager({ core, settings: { dataDir: dir.path, duckdbPath }, logger: createLogger({ level: 'warn' }) });
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
  const baseline = await best(rawAppender);
  const exported = await warm(endToEnd);
  return ratioTable([
    { name: 'raw DuckDB appender (baseline: warm, best of runs)', perSecond: baseline, baseline },
    { name: 'publish -> DuckDB rows committed (exactly-once)', perSecond: exported, baseline, minRatio: 0.5 },
  ]);
}
