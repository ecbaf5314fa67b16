import type { DuckDBConnection } from '@duckdb/node-api';
import { PROGRESS_TABLE } from './progress-log.js';
import { WRITTEN_IDS_TABLE } from './written-ids.js';

/** Before subscriptions had uids, progress was kept under their names here; adopted once, then dropped. */
const NAME_KEYED_PROGRESS = '_orderly_export_progress';
const NAME_KEYED_IDS = '_orderly_export_ids';

/**
 * Progress kept under this subscription's name (before subscriptions had uids) is its own: moved under
 * its uid in one transaction, so it is adopted exactly once. A legacy table left empty is dropped.
 */
export async function adoptNameKeyedProgress(connection: DuckDBConnection, subscription: { name: string; uid: string }): Promise<void> {
  const present = await connection.runAndReadAll(
    'SELECT table_name FROM information_schema.tables WHERE table_catalog = current_database() AND table_schema = current_schema() AND table_name IN ($1, $2)',
    [NAME_KEYED_PROGRESS, NAME_KEYED_IDS],
  );
  const legacy = new Set(present.getRows().map(([name]) => String(name)));
  if (!legacy.size) return;
  await connection.run('BEGIN TRANSACTION');
  try {
    const params = [subscription.uid, subscription.name];
    if (legacy.has(NAME_KEYED_PROGRESS)) {
      await connection.run(
        `INSERT INTO ${PROGRESS_TABLE} (subscription_uid, subscription, ordering_key, last_sequence) SELECT $1, subscription, ordering_key, last_sequence FROM ${NAME_KEYED_PROGRESS} WHERE subscription = $2`,
        params,
      );
      await connection.run(`DELETE FROM ${NAME_KEYED_PROGRESS} WHERE subscription = $1`, [subscription.name]);
    }
    if (legacy.has(NAME_KEYED_IDS)) {
      await connection.run(`ALTER TABLE ${NAME_KEYED_IDS} ADD COLUMN IF NOT EXISTS publish_time TIMESTAMP`);
      await connection.run(
        `INSERT INTO ${WRITTEN_IDS_TABLE} SELECT $1, subscription, message_id, publish_time FROM ${NAME_KEYED_IDS} WHERE subscription = $2`,
        params,
      );
      await connection.run(`DELETE FROM ${NAME_KEYED_IDS} WHERE subscription = $1`, [subscription.name]);
    }
    await connection.run('COMMIT');
  } catch (e) {
    await connection.run('ROLLBACK').catch(() => undefined);
    throw e;
  }
  for (const table of legacy) {
    const left = await connection.runAndReadAll(`SELECT count(*) FROM ${table}`);
    if (Number(left.getRows()[0]![0]) === 0) await connection.run(`DROP TABLE ${table}`);
  }
}
