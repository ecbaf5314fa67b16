import type { DuckDBConnection } from '@duckdb/node-api';
import { LoopSlicer } from '../../src/connector/loop-slicer.js';

/**
 * The table of each ordering key's last written sequence, per subscription uid (the name is there for
 * people reading it). Append-only — one row per key per committed batch, the latest per key wins
 * (indexed upserts are slow) — and rewritten when it holds PROGRESS_COMPACT_RATIO rows per key.
 */
export const PROGRESS_TABLE = '_orderly_export_key_progress';
const PROGRESS_COMPACT_RATIO = 8;

/** One subscription's per-key progress: loaded once, then appended to inside the writer's transactions. */
export class ProgressLog {
  private readonly last = new Map<string, number>();
  private rows = 0;

  private constructor(private readonly subscription: { name: string; uid: string }) {}

  static async create(connection: DuckDBConnection): Promise<void> {
    await connection.run(
      `CREATE TABLE IF NOT EXISTS ${PROGRESS_TABLE}(subscription_uid VARCHAR, subscription VARCHAR, ordering_key VARCHAR, last_sequence BIGINT)`,
    );
  }

  static async load(connection: DuckDBConnection, subscription: { name: string; uid: string }): Promise<ProgressLog> {
    const log = new ProgressLog(subscription);
    const rows = await connection.runAndReadAll(
      `SELECT ordering_key, max(last_sequence), count(*) FROM ${PROGRESS_TABLE} WHERE subscription_uid = $1 GROUP BY ordering_key`,
      [subscription.uid],
    );
    for (const [key, seq, count] of rows.getRows()) {
      log.last.set(String(key), Number(seq));
      log.rows += Number(count);
    }
    return log;
  }

  /** Each key's last written sequence. */
  lastSequences(): ReadonlyMap<string, number> {
    return this.last;
  }

  /**
   * Inside the caller's transaction: records each key's new last sequence (compacting the log when it
   * grew long). Returns what to apply in memory once the transaction committed. Appends in slices: a
   * compaction writes every key's mark (10,000 keys blocked the loop 50-140 ms in one go, bench/memory.ts).
   */
  async append(connection: DuckDBConnection, progress: Map<string, number>): Promise<() => void> {
    const { uid, name } = this.subscription;
    const compact = this.rows + progress.size > PROGRESS_COMPACT_RATIO * Math.max(1000, this.last.size);
    if (compact) await connection.run(`DELETE FROM ${PROGRESS_TABLE} WHERE subscription_uid = $1`, [uid]);
    const marks = compact ? new Map([...this.last, ...progress]) : progress;
    if (marks.size) {
      const log = await connection.createAppender(PROGRESS_TABLE);
      const slicer = new LoopSlicer();
      for (const [key, seq] of marks) {
        if (slicer.due) {
          log.flushSync();
          await slicer.yield();
        }
        log.appendVarchar(uid);
        log.appendVarchar(name);
        log.appendVarchar(key);
        log.appendBigInt(BigInt(seq));
        log.endRow();
      }
      log.closeSync();
    }
    const rows = compact ? marks.size : this.rows + marks.size;
    return () => {
      for (const [key, seq] of progress) this.last.set(key, seq);
      this.rows = rows;
    };
  }
}
