import type { DuckDBConnection } from '@duckdb/node-api';
import { CommittedRanges } from '../../src/connector/committed-ranges.js';
import { LoopSlicer } from '../../src/connector/loop-slicer.js';

/**
 * The table of the sequence ranges of each ordering key written, per subscription uid (the name is there
 * for people reading it). Append-only — one row per key per committed batch, its range as it stands after
 * the batch; ranges only grow, so their union is what is written (indexed upserts are slow) — and
 * rewritten when it holds PROGRESS_COMPACT_RATIO rows per key.
 *
 * Ranges, not the last sequence: read as "1 to last", a seek back that brought a key's messages the table
 * never had (published before the subscription, kept by the topic's retention) found them below the mark
 * and acked them unwritten. A batch that goes on past a key's highest range extends it: what lies between
 * is what the subscription did not deliver (its filter), as an ordered subscription delivers each key's
 * messages in order.
 */
export const PROGRESS_TABLE = '_orderly_export_key_progress';
const PROGRESS_COMPACT_RATIO = 8;

/** One subscription's per-key progress: loaded once, then appended to inside the writer's transactions. */
export class ProgressLog {
  private rows = 0;

  private constructor(
    private readonly subscription: { name: string; uid: string },
    private readonly written: CommittedRanges,
  ) {}

  static async create(connection: DuckDBConnection): Promise<void> {
    await connection.run(
      `CREATE TABLE IF NOT EXISTS ${PROGRESS_TABLE}(subscription_uid VARCHAR, subscription VARCHAR, ordering_key VARCHAR, last_sequence BIGINT, first_sequence BIGINT)`,
    );
    // Tables from before ranges: a row without a first sequence stands for 1 to its last, as it was read then.
    await connection.run(`ALTER TABLE ${PROGRESS_TABLE} ADD COLUMN IF NOT EXISTS first_sequence BIGINT`);
  }

  /**
   * `written`: the ranges the writer's redelivery filter checks. The log's rows are loaded into them, and
   * each batch's once its transaction committed: one copy of what the table holds, not one per reader.
   */
  static async load(
    connection: DuckDBConnection,
    subscription: { name: string; uid: string },
    written: CommittedRanges,
  ): Promise<ProgressLog> {
    const log = new ProgressLog(subscription, written);
    // The rows of one range, batch after batch, share its first sequence.
    const rows = await connection.runAndReadAll(
      `SELECT ordering_key, coalesce(first_sequence, 1) AS first, max(last_sequence), count(*) FROM ${PROGRESS_TABLE}
       WHERE subscription_uid = $1 GROUP BY ordering_key, first`,
      [subscription.uid],
    );
    for (const [key, first, last, count] of rows.getRows()) {
      log.written.add(String(key), Number(first), Number(last));
      log.rows += Number(count);
    }
    return log;
  }

  /**
   * Inside the caller's transaction: records the ranges a batch wrote (per key, its lowest and highest
   * sequence), compacting the log when it grew long. Returns what applies them to the written ranges,
   * to call once the transaction committed. Appends in slices: a compaction writes every key's ranges
   * (10,000 keys blocked the loop 50-140 ms in one go, bench/memory.ts).
   */
  async append(connection: DuckDBConnection, batch: Map<string, [number, number]>): Promise<() => void> {
    const { uid, name } = this.subscription;
    const recorded: [key: string, first: number, last: number][] = [];
    for (const [key, [first, last]] of batch) {
      const highest = this.written.last(key);
      recorded.push(highest && first > highest[1] ? [key, highest[0], last] : [key, first, last]);
    }
    let rows = this.rows + recorded.length;
    if (rows > PROGRESS_COMPACT_RATIO * Math.max(1000, this.written.keys)) {
      await connection.run(`DELETE FROM ${PROGRESS_TABLE} WHERE subscription_uid = $1`, [uid]);
      // The batch's ranges as they are, beside the written ones they may extend or touch: load unites them.
      rows = (await appendRanges(connection, uid, name, this.written.entries())) + recorded.length;
    }
    await appendRanges(connection, uid, name, recorded);
    return () => {
      for (const [key, first, last] of recorded) this.written.add(key, first, last);
      this.rows = rows;
    };
  }
}

async function appendRanges(
  connection: DuckDBConnection,
  uid: string,
  name: string,
  ranges: Iterable<readonly [key: string, first: number, last: number]>,
): Promise<number> {
  let appender: Awaited<ReturnType<DuckDBConnection['createAppender']>> | undefined;
  const slicer = new LoopSlicer();
  let rows = 0;
  for (const [key, first, last] of ranges) {
    appender ??= await connection.createAppender(PROGRESS_TABLE);
    if (slicer.due) {
      appender.flushSync();
      await slicer.yield();
    }
    appender.appendVarchar(uid);
    appender.appendVarchar(name);
    appender.appendVarchar(key);
    appender.appendBigInt(BigInt(last));
    appender.appendBigInt(BigInt(first));
    appender.endRow();
    rows++;
  }
  appender?.closeSync();
  return rows;
}
