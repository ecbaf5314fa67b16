/**
 * The DuckDB export's baseline (bench/duckdb-export.ts) in a process of its own, started without
 * bin/process-env.json's DuckDB allocator setting (paths.ts, baselineEnv): measured at its best.
 */
import { DuckDBInstance, timestampValue } from '@duckdb/node-api';
import { join } from 'node:path';
import { CHECKPOINT_THRESHOLD, duckDbSettings } from '../src/duckdb/database.js';
import { tempDir } from '../test/helpers/temp-dir.js';
import { exitWithParent, reply } from './child.js';
import { best, time } from './report.js';
import { EVENTS_TABLE, KEYS, MESSAGES, payload } from './workload.js';

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

exitWithParent();
await reply(await best(rawAppender));
process.exit(0);
