import type { DuckDBConnection } from '@duckdb/node-api';

/**
 * Does first, as queries (they run on libuv's pool while the event loop runs on), what an instance's
 * `closeSync` would otherwise do on the loop, so that closing leaves it nothing to wait for:
 * - `SET threads = 1` stops DuckDB's worker threads, which closeSync joins, each returning the memory it
 *   holds as it exits (at once, page by page, with Orderly's allocator setting: bin/process-env.json): the
 *   loop waited 50-100 ms for them at the end of a 1M Parquet drain;
 * - `checkpoint` (a database file) writes the WAL into the file, which closeSync does otherwise: up to
 *   CHECKPOINT_THRESHOLD of it, ~0.9 s of a table export's stop for a 39 MB WAL.
 * `connect` gives the connection they run on (for a file, one that uses it). A failure is left to
 * closeSync, which does the same work on the loop.
 */
export async function closeOffTheLoop(connect: () => Promise<DuckDBConnection>, { checkpoint = false } = {}): Promise<void> {
  try {
    const connection = await connect();
    try {
      if (checkpoint) await connection.run('CHECKPOINT');
      await connection.run('SET threads = 1');
    } finally {
      connection.closeSync();
    }
  } catch {
    // closeSync checkpoints and stops the threads just as well, on the loop.
  }
}
