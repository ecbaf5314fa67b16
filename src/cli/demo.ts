import { Presets, SingleBar } from 'cli-progress';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { auditSubscription } from '../../connectors/object-storage/audit.js';
import { parseObjectStorageConfig } from '../../connectors/object-storage/config.js';
import { loadJob } from '../job/job-config.js';
import { JobRuntime } from '../job/job-runtime.js';
import { queryJob } from '../job/query.js';
import { createLogger } from '../log.js';
import { printAudit } from './main.js';
import { publishFile } from './publish-file.js';

const JOB = fileURLToPath(new URL('../../fixtures/demo/job.yaml', import.meta.url));
const EVENTS = fileURLToPath(new URL('../../fixtures/demo/orders.jsonl', import.meta.url));

/**
 * `orderly demo`: runs fixtures/demo/job.yaml on embedded defaults (a temporary data directory, a DuckDB
 * file, an S3 server on 127.0.0.1), publishes the order changes keyed by order id, waits for both
 * exports, finalizes the files, then queries the table and the files and audits the files' order.
 */
export async function runDemo(o: { dataDir?: string }): Promise<void> {
  const dataDir = resolve(o.dataDir ?? mkdtempSync(join(tmpdir(), 'orderly-demo-')));
  const job = loadJob(JOB);
  job.dataDir = dataDir;
  job.duckdb!.path = join(dataDir, 'demo.duckdb');
  job.metrics = undefined;
  const runtime = await JobRuntime.start(job, createLogger({ level: 'warn' }));
  try {
    const { core, exports } = runtime;
    const tty = process.stdout.isTTY;
    console.log(`Orderly demo — data in ${dataDir}`);
    const published = await publishFile((messages) => core.publish('order-changes', messages), { file: EVENTS, orderingKeyField: 'order_id', progress: tty });
    console.log(`published ${published.published} order changes (refused ${published.refused.length})`);

    const subscriptions = ['orders-to-duckdb', 'orders-to-parquet'];
    const runners = subscriptions.map((s) => exports.runner(s)!);
    const total = published.published * runners.length;
    const done = () => runners.reduce((n, r) => n + r.stats.written + r.outstanding, 0);
    const bar = tty ? new SingleBar({ format: 'export  [{bar}] {value}/{total} deliveries', hideCursor: true }, Presets.shades_classic) : undefined;
    bar?.start(total, 0);
    const deadline = Date.now() + 45_000;
    while (done() < total && Date.now() < deadline) {
      bar?.update(done());
      await new Promise((r) => setTimeout(r, 50));
    }
    await exports.stop(); // finalizes the open Parquet files and acks them
    bar?.update(total);
    bar?.stop();
    subscriptions.forEach((s, i) => {
      console.log(`${s}: state ${core.getSubscription(s).state}, exported ${runners[i]!.stats.written}, backlog ${core.metrics(s).backlogMessages}`);
    });

    console.log('\nThe DuckDB table (CDC applied per order: one row per live order):');
    console.table(await queryJob(runtime, 'SELECT status, count(*) AS orders, round(sum(amount), 2) AS amount FROM analytics.orders GROUP BY status ORDER BY orders DESC'));
    console.log('The Parquet files (view orders_to_parquet over the exported objects):');
    console.table(
      await queryJob(
        runtime,
        `SELECT count(*) AS records, count(DISTINCT ordering_key) AS orders, count(DISTINCT filename) AS files,
                count(*) FILTER (WHERE prev IS NOT NULL AND sequence <> prev + 1) AS order_breaks
         FROM (SELECT ordering_key, sequence, filename,
                      lag(sequence) OVER (PARTITION BY ordering_key ORDER BY sequence) AS prev
               FROM orders_to_parquet)`,
      ),
    );
    const sub = core.getSubscription('orders-to-parquet');
    console.log('Order audit of the Parquet files:');
    printAudit(await auditSubscription({ name: sub.name, uid: core.identity(sub.name).uid }, parseObjectStorageConfig(sub.cloudStorageConfig), { dataDir, objectStorage: runtime.objectStorage }));
  } finally {
    await runtime.stop();
    if (!o.dataDir) rmSync(dataDir, { recursive: true, force: true });
  }
}
