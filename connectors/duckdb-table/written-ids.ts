import { timestampValue, type DuckDBConnection } from '@duckdb/node-api';
import { LoopSlicer } from '../../src/connector/loop-slicer.js';
import { retentionCutoff, type WrittenIds } from '../../src/connector/redelivery-filter.js';
import type { SubscriptionSpec } from '../../src/core/subscription-config.js';
import { quoteString } from '../../src/duckdb/sql.js';

/** The ids of messages recognised by id (see RedeliveryMark), per subscription uid, with their publish time. */
export const WRITTEN_IDS_TABLE = '_orderly_export_written_ids';

/** The written ids of one subscription, kept in the database next to its rows (the same transaction). */
export class DuckDbWrittenIds implements WrittenIds {
  private prunedAt = 0;

  constructor(
    private readonly connection: () => DuckDBConnection,
    private readonly subscription: { name: string; uid: string },
    private readonly spec: Pick<SubscriptionSpec, 'messageRetentionDuration'>,
    private readonly now: () => number,
  ) {}

  static async create(connection: DuckDBConnection): Promise<void> {
    await connection.run(`CREATE TABLE IF NOT EXISTS ${WRITTEN_IDS_TABLE}(
      subscription_uid VARCHAR, subscription VARCHAR, message_id VARCHAR, publish_time TIMESTAMP, PRIMARY KEY(subscription_uid, message_id))`);
  }

  async find(ids: string[]): Promise<Set<string>> {
    if (!ids.length) return new Set();
    const result = await this.connection().runAndReadAll(
      `SELECT message_id FROM ${WRITTEN_IDS_TABLE} WHERE subscription_uid = ${quoteString(this.subscription.uid)} AND message_id IN (${ids.map(quoteString).join(', ')})`,
    );
    return new Set(result.getRows().map((r) => String(r[0])));
  }

  /** Inside the caller's transaction: records the ids (and forgets expired ones, at most once a minute). */
  async append(ids: { id: string; publishTime: Date }[]): Promise<void> {
    if (!ids.length) return;
    const { uid, name } = this.subscription;
    const written = await this.connection().createAppender(WRITTEN_IDS_TABLE);
    const slicer = new LoopSlicer();
    for (const { id, publishTime } of ids) {
      if (slicer.due) {
        written.flushSync();
        await slicer.yield();
      }
      written.appendVarchar(uid);
      written.appendVarchar(name);
      written.appendVarchar(id);
      written.appendTimestamp(timestampValue(BigInt(publishTime.getTime()) * 1000n));
      written.endRow();
    }
    written.closeSync();
    await this.forgetExpired();
  }

  /** A message past the subscription's messageRetentionDuration can never be delivered again, so its id goes. */
  private async forgetExpired(): Promise<void> {
    const now = this.now();
    if (now - this.prunedAt < 60_000) return;
    this.prunedAt = now;
    const cutoff = timestampValue(BigInt(retentionCutoff(this.spec, now)) * 1000n);
    await this.connection().run(`DELETE FROM ${WRITTEN_IDS_TABLE} WHERE subscription_uid = $1 AND publish_time < $2`, [
      this.subscription.uid,
      cutoff,
    ]);
  }
}
