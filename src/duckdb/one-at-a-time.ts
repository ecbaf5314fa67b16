import type { DuckDBInstance } from '@duckdb/node-api';

/** Per DuckDB instance, the last piece of work queued with `oneAtATime`. */
const queues = new WeakMap<DuckDBInstance, Promise<unknown>>();

/**
 * Runs `work` after every earlier piece of work queued on the same instance has settled (whatever its
 * outcome), and settles as it does. For work that must not overlap on one instance: the table writers'
 * setup of shared tables (concurrent CREATE TABLE IF NOT EXISTS failed with "Catalog write-write
 * conflict"), and large Parquet COPYs (several at once ran out of the instance's memory limit).
 */
export function oneAtATime(instance: DuckDBInstance, work: () => Promise<void>): Promise<void> {
  const run = (queues.get(instance) ?? Promise.resolve()).then(work, work);
  queues.set(instance, run);
  return run;
}
