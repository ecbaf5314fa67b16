import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { queryDuckDb } from '../../src/duckdb/database.js';
import { tempDir } from '../helpers/temp-dir.js';
import { openExport } from '../helpers/export.js';
import { waitFor } from '../helpers/wait-for.js';
import { startTestS3, type TestS3 } from '../helpers/s3.js';

/**
 * Issue #9.2a: a topic and an export subscription deleted and created again under the same names (the
 * usual emulator test pattern) start their per-key sequences at 1 again. Sink progress kept under the
 * name took the new messages for ones already written: acked, and written nowhere.
 */
let s3: TestS3;
beforeAll(async () => {
  s3 = await startTestS3();
});
afterAll(async () => s3.close());

let dir: ReturnType<typeof tempDir>;
let env: Awaited<ReturnType<typeof openExport>>;
beforeEach(async () => {
  dir = tempDir();
  env = await openExport(dir.path, { objectStorage: s3.settings });
});
afterEach(async () => {
  await env.close();
  dir.remove();
});

const keyed = (round: string, n: number) =>
  Array.from({ length: n }, (_, i) => ({ data: `${round}-k${i % 2}-${Math.floor(i / 2)}`, orderingKey: `k${i % 2}` }));
const runner = () => env.exports.runner('sub');
/** Everything published so far is held or written by the current runner. */
const delivered = (n: number) => waitFor(`${n} deliveries`, () => (runner()?.outstanding ?? 0) + (runner()?.stats.written ?? 0) >= n);

async function create(exportConfig: Record<string, unknown>): Promise<void> {
  await env.core.createTopic('orders');
  await env.core.createSubscription('sub', { topic: 'orders', enableMessageOrdering: true, ...exportConfig });
}

/** Deletes both and creates them again; `syncBetween`: the export manager sees the deletion first (REST does). */
async function recreate(exportConfig: Record<string, unknown>, syncBetween: boolean): Promise<void> {
  await env.core.deleteSubscription('sub');
  await env.core.deleteTopic('orders');
  if (syncBetween) await env.exports.sync();
  await create(exportConfig);
  await env.exports.sync();
}

describe.each([true, false])('topic and export subscription created again under the same names (sync between: %s)', (syncBetween) => {
  it('DuckDB: the new messages are written, not taken for the old ones', async () => {
    await queryDuckDb(env.duckdbPath, 'CREATE TABLE orders(data VARCHAR)');
    const config = { bigqueryConfig: { table: 'p.main.orders' } };
    await create(config);
    await env.exports.sync();
    await env.core.publish('orders', keyed('old', 10));
    await waitFor('first export', () => env.core.metrics('sub').backlogMessages === 0);
    const oldUid = env.core.identity('sub').uid;

    await recreate(config, syncBetween);
    expect(env.core.identity('sub').uid).not.toBe(oldUid);
    await env.core.publish('orders', keyed('new', 10));
    await waitFor('second export', () => env.core.metrics('sub').backlogMessages === 0);
    expect(runner()!.stats.written).toBe(10);

    const rows = (await queryDuckDb(env.duckdbPath, 'SELECT data FROM orders ORDER BY rowid')).map((r) => String(r.data));
    expect(rows.filter((d) => d.startsWith('old-')).sort()).toEqual(
      keyed('old', 10)
        .map((m) => m.data)
        .sort(),
    );
    // Every new message once, each key in publish order.
    for (const k of ['k0', 'k1'])
      expect(rows.filter((d) => d.startsWith(`new-${k}-`))).toEqual(Array.from({ length: 5 }, (_, i) => `new-${k}-${i}`));
  });

  it('object storage: the new messages land in new objects, not taken for the old ones', async () => {
    const bucket = await s3.bucket();
    const config = { cloudStorageConfig: { bucket, filenameDatetimeFormat: 'YYYY-MM-DDThh:mm:ssZ', textConfig: {} } };
    await create(config);
    await env.exports.sync();
    await env.core.publish('orders', keyed('old', 10));
    await delivered(10);
    // Deleting stops the runner, which finalizes and uploads its open file.
    await recreate(config, syncBetween);
    await env.core.publish('orders', keyed('new', 10));
    await delivered(10);
    await env.exports.stop();

    const lines: string[] = [];
    for (const name of await s3.list(bucket)) lines.push(...(await s3.get(bucket, name)).toString().trim().split('\n'));
    expect(lines.filter((l) => l.startsWith('old-')).sort()).toEqual(
      keyed('old', 10)
        .map((m) => m.data)
        .sort(),
    );
    for (const k of ['k0', 'k1'])
      expect(lines.filter((l) => l.startsWith(`new-${k}-`))).toEqual(Array.from({ length: 5 }, (_, i) => `new-${k}-${i}`));
    expect(env.core.metrics('sub').backlogMessages).toBe(0);
  });
});
