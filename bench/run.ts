/**
 * `npm run bench`: every benchmark, each against its own same-run baseline or target. Each benchmark runs in
 * a fresh process started as `orderly` starts node (its V8 flags and environment: orderlyNode in paths.ts),
 * baseline and measurement together, so one's heap and native caches do not slow the
 * next. `npm run bench -- <name>` runs one (the names below). A target that is missed prints FAIL but is
 * not an error: the exit code is non-zero only when a benchmark could not run.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { DEFAULT_HEAP_GROWTH_PERCENT, limitHeapGrowth } from '../src/job/heap-growth.js';
import { benchCli } from './cli.js';
import { benchClient } from './client.js';
import { benchCore } from './core.js';
import { benchDuckDbExport } from './duckdb-export.js';
import { benchEndpoint } from './endpoint.js';
import { benchLatency } from './latency.js';
import { benchMemory } from './memory.js';
import { benchObjectExport } from './object-export.js';
import { orderlyNode } from './paths.js';
import { report, type BenchOutput } from './report.js';
import { benchScaling } from './scaling.js';

const benchmarks: Record<string, [string, () => Promise<BenchOutput>]> = {
  core: ['core: 1 KB messages, 10,000 ordering keys (baseline: raw SQLite inserts, same pragmas)', benchCore],
  duckdb: ['DuckDB export: 1 KB JSON, 10,000 keys (baseline: raw DuckDB appender, same rows, warm, best of runs)', benchDuckDbExport],
  objects: [
    'object-storage export: 1 KB JSON, 10,000 keys (baselines: DuckDB COPY TO parquet / text + one PutObject, warm, best of runs)',
    benchObjectExport,
  ],
  client: ["Pub/Sub endpoint: Google's Node client, 1 KB, 1,000 keys, ordering (baseline: the same through the library API)", benchClient],
  memory: [
    'memory, start-up, event loop and disk at a backlog: 1 KB messages, 10,000 keys, default settings, each path in a fresh process',
    benchMemory,
  ],
  latency: ['publish -> delivery latency at a steady rate: 1 KB messages, 10,000 keys, ordering', benchLatency],
  endpoint: ['endpoint: lean gRPC client against `orderly serve` vs NATS JetStream, same workload, same run', benchEndpoint],
  cli: ['CLI start-up: whole-process wall clock of `node bin/orderly.js`', benchCli],
  scaling: [
    'worker fleets: 1-3 `orderly run` workers export one remote subscription from `orderly serve` to S3 (baseline: the embedded core, one process)',
    benchScaling,
  ],
};

/** The argument a benchmark's own process gets after its name (each runs in a process started as `orderly` starts one). */
const MEASURE = '--measure';
const [only, role] = process.argv.slice(2);
if (only && !Object.hasOwn(benchmarks, only))
  throw new Error(`unknown benchmark ${JSON.stringify(only)} (known: ${Object.keys(benchmarks).join(', ')})`);
if (role === MEASURE) {
  // Each benchmark's process, baseline included, collects its heap as `orderly run` does by default.
  limitHeapGrowth(DEFAULT_HEAP_GROWTH_PERCENT);
  const [title, run] = benchmarks[only!]!;
  report(title, await run());
} else {
  if (!only) {
    console.log(`# Orderly benchmarks — node ${process.version}, ${new Date().toISOString()}`);
    console.log(
      `BENCH_MESSAGES=${process.env.BENCH_MESSAGES ?? 50_000} (core, duckdb, objects, client), BENCH_BACKLOG=${process.env.BENCH_BACKLOG ?? 1_000_000} (memory)`,
    );
  }
  const failed: string[] = [];
  for (const name of only ? [only] : Object.keys(benchmarks)) {
    const run = spawnSync(process.execPath, [...process.execArgv, ...orderlyNode.flags, fileURLToPath(import.meta.url), name, MEASURE], {
      stdio: 'inherit',
      env: { ...orderlyNode.env, ...process.env },
    });
    if (run.status !== 0) failed.push(name);
  }
  if (failed.length) {
    console.error(`\nbenchmarks that could not run: ${failed.join(', ')}`);
    process.exitCode = 1;
  }
}
