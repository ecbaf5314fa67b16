import { copyFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { orderly } from '../helpers/cli.js';
import { files as filesIn, tree as treeOf } from '../helpers/dir-contents.js';
import { tempDirPerTest } from '../helpers/temp-dir-per-test.js';

const dir = tempDirPerTest();
const tree = () => treeOf(dir.path);
const files = () => filesIn(dir.path);

describe('orderly query on a job that never ran', () => {
  it('answers, and leaves no data directory, lock, store, DuckDB file or S3 folder behind', async () => {
    // The demo job: its data directory holds the store, the DuckDB file and the embedded S3 server's folder.
    const job = join(dir.path, 'job.yaml');
    copyFileSync('fixtures/demo/job.yaml', job);
    const answer = await orderly('query', job, 'SELECT 42 AS n', '--json');
    expect([answer.code, answer.stderr]).toEqual([0, '']);
    expect(JSON.parse(answer.stdout)).toEqual([{ n: 42 }]);
    // Its exports' views are absent: a read-only query does not create the file's subscriptions.
    const view = await orderly('query', job, 'SELECT * FROM orders_to_parquet');
    expect(view.code).toBe(1);
    expect(view.stderr).toMatch(/^orderly: Catalog Error: Table with name orders_to_parquet does not exist!/);
    const table = await orderly('query', job, 'SELECT * FROM analytics.orders');
    expect(table.code).toBe(1);
    expect(table.stderr).toMatch(/Table with name "analytics\.orders" does not exist because schema "analytics" does not exist/);
    expect(tree()).toEqual(['job.yaml']);
  }, 60_000);

  it('of a fleet worker leaves no data directory or worker folder behind', async () => {
    const job = join(dir.path, 'job.yaml');
    writeFileSync(
      job,
      stringify({
        projectId: 'query-test',
        dataDir: './data',
        duckdb: { path: './data/db.duckdb' },
        // Nothing listens there: a read-only query only reads the sinks.
        remote: {
          endpoint: '127.0.0.1:9',
          exports: [{ subscription: 'events-to-table', bigqueryConfig: { table: 'query-test.main.events' } }],
        },
      }),
    );
    const answer = await orderly('query', job, 'SELECT 42 AS n', '--json');
    expect([answer.code, answer.stderr]).toEqual([0, '']);
    expect(JSON.parse(answer.stdout)).toEqual([{ n: 42 }]);
    expect(tree()).toEqual(['job.yaml']);
  }, 60_000);
});

describe('orderly query on a job with a store', () => {
  it('answers with its export views empty, and creates or changes no file (no embedded S3 folder or bucket)', async () => {
    const job = join(dir.path, 'job.yaml');
    copyFileSync('fixtures/demo/job.yaml', job);
    // A publish makes the store and the file's subscriptions; nothing is exported yet.
    writeFileSync(join(dir.path, 'orders.jsonl'), '{"order_id":"o-1","status":"paid"}\n');
    const published = await orderly('publish', job, '--topic', 'order-changes', '--file', join(dir.path, 'orders.jsonl'));
    expect(published.code, published.stderr).toBe(0);
    const before = { tree: tree(), files: files() };
    const answer = await orderly('query', job, 'SELECT count(*) AS n FROM orders_to_parquet', '--json');
    expect([answer.code, answer.stderr]).toEqual([0, '']);
    expect(JSON.parse(answer.stdout)).toEqual([{ n: '0' }]);
    expect({ tree: tree(), files: files() }).toEqual(before);
  }, 60_000);
});
