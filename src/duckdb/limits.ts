/*
 * DuckDB's limits, apart from the module that opens instances: setting them (every job does, at start)
 * must not load DuckDB's native binding, which a job without a DuckDB export never needs.
 */

/**
 * Memory and threads every DuckDB instance Orderly opens may use. DuckDB's own default is 80% of the
 * machine's memory; Orderly's keeps an exporter's whole process within ~300 MiB (job file: memory.duckdb,
 * memory.duckdbTables). A database file a table export writes gets `tableMemoryLimit`: what it holds past
 * the limit is on disk already, and a table export's drain peaked ~80 MiB higher at 128 MiB than at 32.
 * The Parquet writer's scratch database and queries get `memoryLimit`: a Parquet file is encoded from
 * memory (100 KB messages in a 16 MiB file did not fit 32 MiB), and a query's readers take more (DuckDB's
 * JSON reader alone 32 MiB a thread).
 * A table database gets `tableThreads` (memory.duckdbTableThreads): a second DuckDB thread there added
 * ~30 MiB to a table export's 1M drain for little speed (docs/benchmarks.md); the Parquet writer encodes
 * on DuckDB's threads and keeps `threads`.
 */
let limits = { memoryLimit: '128MiB', tableMemoryLimit: '32MiB', threads: 2, tableThreads: 1 };

/** Applies to instances opened from now on. */
export function setDuckDbLimits(next: { memoryLimit?: string; tableMemoryLimit?: string; threads?: number; tableThreads?: number }): void {
  limits = { ...limits, ...next };
}

/** What an instance is opened for: the tables an export writes (memory.duckdbTables), or anything else. */
export type DuckDbUse = 'tables' | 'other';

/** DuckDB settings for a new instance, with Orderly's limits. */
export function duckDbSettings(use: DuckDbUse, extra: Record<string, string> = {}): Record<string, string> {
  const tables = use === 'tables';
  return {
    memory_limit: tables ? limits.tableMemoryLimit : limits.memoryLimit,
    threads: String(tables ? limits.tableThreads : limits.threads),
    ...extra,
  };
}

/** DuckDB's out-of-memory errors, and the invalidated database a failed checkpoint leaves. */
export function isDuckDbMemoryError(e: unknown): boolean {
  const message = (e as Error).message ?? String(e);
  return /Out of Memory Error|failed to pin block|could not allocate block|has been invalidated/i.test(message);
}
