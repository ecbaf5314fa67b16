import { Presets, SingleBar } from 'cli-progress';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { auditExport } from '../job/export-audit.js';
import { parseJob, readJobDocument } from '../job/job-config.js';
import { JobRuntime } from '../job/job-runtime.js';
import { queryJob } from '../job/query.js';
import { createLogger } from '../log.js';
import { packageFile } from '../package-file.js';
import { answerCollector } from './answer-table.js';
import { printAudit } from './print-audit.js';
import { publishFile } from './publish-file.js';

const JOB = packageFile('fixtures/demo/job.yaml');
const EVENTS = packageFile('fixtures/demo/orders.jsonl');

/**
 * `orderly demo`: runs fixtures/demo/job.yaml on embedded defaults (a temporary data directory, a DuckDB
 * file, an S3 server on 127.0.0.1), publishes the order changes keyed by order id, waits for both
 * exports, finalizes the files, then queries the table and the files and audits the files' order.
 */
export async function runDemo(o: { dataDir?: string }): Promise<void> {
  const dataDir = resolve(o.dataDir ?? mkdtempSync(join(tmpdir(), 'orderly-demo-')));
  // The demo's own job file, with its data (the store, the DuckDB file, the S3 server's) in dataDir.
  const document = readJobDocument(JOB);
  const duckdb = document.duckdb as Record<string, unknown>;
  const demo: Record<string, unknown> = { ...document, dataDir, duckdb: { ...duckdb, path: join(dataDir, 'demo.duckdb') } };
  delete demo.metrics;
  const job = parseJob(demo, JOB);
  const runtime = await JobRuntime.start(job, createLogger({ level: 'warn' }));
  try {
    const { core, exports } = runtime;
    const tty = process.stdout.isTTY;
    console.log(`Orderly demo — data in ${dataDir}`);
    const published = await publishFile((messages) => core.publish('order-changes', messages), {
      file: EVENTS,
      orderingKeyField: 'order_id',
      progress: tty,
    });
    console.log(`published ${published.published} order changes (refused ${published.refused.length})`);

    const subscriptions = ['orders-to-duckdb', 'orders-to-parquet'];
    const runners = subscriptions.map((s) => exports.runner(s)!);
    const total = published.published * runners.length;
    const done = () => runners.reduce((n, r) => n + r.stats.written + r.outstanding, 0);
    const bar = tty
      ? new SingleBar({ format: 'export  [{bar}] {value}/{total} deliveries', hideCursor: true }, Presets.shades_classic)
      : undefined;
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
      console.log(
        `${s}: state ${core.getSubscription(s).state}, exported ${runners[i]!.stats.written}, backlog ${core.metrics(s).backlogMessages}`,
      );
    });

    const printQuery = async (sql: string) => {
      const answer = answerCollector();
      await queryJob(runtime, sql, undefined, answer.onRows);
      console.log(answer.table());
    };
    console.log('\nThe DuckDB table (CDC applied per order: one row per live order):');
    await printQuery(
      'SELECT status, count(*) AS orders, round(sum(amount), 2) AS amount FROM analytics.orders GROUP BY status ORDER BY orders DESC',
    );
    console.log('The Parquet files (view orders_to_parquet over the exported objects):');
    await printQuery(
      `SELECT count(*) AS records, count(DISTINCT ordering_key) AS orders, count(DISTINCT filename) AS files,
                count(*) FILTER (WHERE prev IS NOT NULL AND sequence <> prev + 1) AS order_breaks
         FROM (SELECT ordering_key, sequence, filename,
                      lag(sequence) OVER (PARTITION BY ordering_key ORDER BY sequence) AS prev
               FROM orders_to_parquet)`,
    );
    console.log('Order audit of the Parquet files:');
    printAudit(await auditExport(runtime, 'orders-to-parquet'));
  } finally {
    await runtime.stop();
    if (!o.dataDir) rmSync(dataDir, { recursive: true, force: true });
  }
}
