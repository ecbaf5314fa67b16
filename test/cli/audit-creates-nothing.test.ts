import { copyFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { orderly } from '../helpers/cli.js';
import { files, tree } from '../helpers/dir-contents.js';
import { tempDirPerTest } from '../helpers/temp-dir-per-test.js';

const dir = tempDirPerTest();

/** The demo job: its data directory holds the store, the DuckDB file (with init statements) and the embedded S3 server's folder. */
function demoJob(): string {
  const job = join(dir.path, 'job.yaml');
  copyFileSync('fixtures/demo/job.yaml', job);
  return job;
}

describe('orderly audit', () => {
  it('of a job that never ran is refused naming its data directory, and leaves nothing behind', async () => {
    const job = demoJob();
    const audit = await orderly('audit', job, 'orders-to-parquet', '--json');
    const dataDir = join(dir.path, 'orderly-data');
    const said = `the data directory ${dataDir} holds no Orderly store: the job never ran there, so it exported nothing to audit`;
    // It could not look: exit 3, not 0 with an empty audit that would pass a mistyped dataDir as all in order.
    expect(audit.code).toBe(3);
    expect(audit.stderr).toContain(`orderly: the audit could not be completed: ${said}`);
    expect(JSON.parse(audit.stdout)).toMatchObject({ error: { code: 'FAILED_PRECONDITION' } });
    // Before: orderly-data/ with the store, its lock, demo.duckdb (the init's table in it) and s3/orders-archive/.
    expect(tree(dir.path)).toEqual(['job.yaml']);
  }, 60_000);

  it('of a job with a store answers, and creates or changes no file (no DuckDB file or init, no S3 folder or bucket)', async () => {
    const job = demoJob();
    // A publish makes the store and the file's subscriptions, and opens no DuckDB file or S3 server.
    writeFileSync(join(dir.path, 'orders.jsonl'), '{"order_id":"o-1","status":"paid"}\n');
    const published = await orderly('publish', job, '--topic', 'order-changes', '--file', join(dir.path, 'orders.jsonl'));
    expect(published.code, published.stderr).toBe(0);
    const before = { tree: tree(dir.path), files: files(dir.path) };
    const audit = await orderly('audit', job, 'orders-to-parquet', '--json');
    expect([audit.code, audit.stderr]).toEqual([0, '']);
    expect(JSON.parse(audit.stdout)).toMatchObject({ objects: 0, records: 0, keys: 0, missing: { count: 0 } });
    expect({ tree: tree(dir.path), files: files(dir.path) }).toEqual(before);
  }, 60_000);
});
