/**
 * `npm run bench`: every benchmark, each against its own same-run baseline. Each benchmark runs in a
 * fresh process (baseline and measurement together), so one's heap and native caches do not slow the
 * next. `npm run bench -- <name>` runs one: core, duckdb, objects, client, scaling.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { benchClient } from './client.js';
import { benchCore } from './core.js';
import { benchDuckDbExport } from './duckdb-export.js';
import { benchObjectExport } from './object-export.js';
import { report, type BenchResult } from './report.js';
import { benchScaling } from './scaling.js';

const benchmarks: Record<string, [string, () => Promise<BenchResult[]>]> = {
  core: ['core: 1 KB messages, 10,000 ordering keys (baseline: raw SQLite inserts, same pragmas)', benchCore],
  duckdb: ['DuckDB export: 1 KB JSON, 10,000 keys (baseline: raw DuckDB appender, same rows)', benchDuckDbExport],
  objects: ['object-storage export: 1 KB JSON, 10,000 keys (baseline: DuckDB COPY TO parquet + one PutObject)', benchObjectExport],
  client: ["Pub/Sub endpoint: Google's Node client, 1 KB, 1,000 keys, ordering (baseline: the same through the library API)", benchClient],
  scaling: ['worker fleets: 1-3 `orderly run` workers export one remote subscription from `orderly serve` to S3 (baseline: the embedded core, one process)', benchScaling],
};

// The AWS SDK warns on Node 20 at client creation; the benchmarks' output is a report, not a log.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
const only = process.argv[2];
if (only) {
  const entry = benchmarks[only];
  if (!entry) throw new Error(`unknown benchmark ${JSON.stringify(only)} (known: ${Object.keys(benchmarks).join(', ')})`);
  report(entry[0], await entry[1]());
} else {
  console.log(`Orderly benchmarks — node ${process.version}, ${new Date().toISOString()}, ${process.env.BENCH_MESSAGES ?? 50_000} messages each`);
  for (const name of Object.keys(benchmarks)) {
    const run = spawnSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), name], { stdio: 'inherit' });
    if (run.status !== 0) process.exitCode = 1;
  }
}
