import { copyFileSync, renameSync, rmSync, truncateSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { queryDuckDb } from '../../src/duckdb/database.js';
import { serveMetrics, statusOf } from '../../src/job/metrics.js';
import { tempDir } from '../helpers/temp-dir.js';
import { openExport } from '../helpers/export.js';
import { waitFor } from '../helpers/wait-for.js';

/**
 * Issue #9.4: a truncated DuckDB export file made the runner log one line and stop for good — backlog
 * stuck, no retry, status ACTIVE. Now the subscription is RESOURCE_ERROR with the file's error as its
 * reason (status, metrics), nothing is acked or dead-lettered meanwhile, and the export resumes by itself
 * once the file is whole again (docs/connectors.md, "When the DuckDB file is damaged").
 */
let dir: ReturnType<typeof tempDir>;
let env: Awaited<ReturnType<typeof openExport>>;
beforeEach(() => {
  dir = tempDir();
});
afterEach(async () => {
  await env.close();
  dir.remove();
});

const KEYS = 5;
const batch = (round: string, n = 50) =>
  Array.from({ length: n }, (_, i) => ({ data: `${round}-k${i % KEYS}-${Math.floor(i / KEYS)}`, orderingKey: `k${i % KEYS}` }));
const backlog = () => env.core.metrics('sub').backlogMessages;
const state = () => env.core.getSubscription('sub').state;

async function start(subscription: Record<string, unknown> = {}): Promise<void> {
  env = await openExport(dir.path);
  if (!env.core.hasTopic('orders')) {
    await queryDuckDb(env.duckdbPath, 'CREATE TABLE orders(data VARCHAR)');
    await env.core.createTopic('orders');
    await env.core.createSubscription('sub', {
      topic: 'orders',
      enableMessageOrdering: true,
      bigqueryConfig: { table: 'p.main.orders' },
      ...subscription,
    });
  }
  await env.exports.sync();
}

/** Copies a file into place in one step, as a restore should be done. */
function restore(backup: string, path: string): void {
  copyFileSync(backup, `${path}.restoring`);
  renameSync(`${path}.restoring`, path);
}

/** Every message once, each key in publish order. */
async function expectRows(rounds: string[]): Promise<void> {
  const rows = (await queryDuckDb(env.duckdbPath, 'SELECT data FROM orders ORDER BY rowid')).map((r) => String(r.data));
  expect(rows).toHaveLength(rounds.length * 50);
  for (let k = 0; k < KEYS; k++) {
    const expected = rounds.flatMap((round) => Array.from({ length: 10 }, (_, i) => `${round}-k${k}-${i}`));
    expect(rows.filter((d) => d.includes(`-k${k}-`))).toEqual(expected);
  }
}

/** The subscription is RESOURCE_ERROR for the file, in status and metrics, and holds its backlog. */
async function expectVisibleError(backlogNow: number): Promise<void> {
  await waitFor('RESOURCE_ERROR', () => state() === 'RESOURCE_ERROR');
  const row = statusOf(env.core, env.exports).find((s) => s.subscription === 'projects/p/subscriptions/sub')!;
  expect(row.stateReason).toContain(env.duckdbPath);
  expect(row.exportErrors).toBeGreaterThan(0);
  const metrics = await serveMetrics(env.core, env.exports, '127.0.0.1', 0);
  try {
    const text = await (await fetch(`${metrics.url}/metrics`)).text();
    expect(text).toContain('orderly_subscription_state{subscription="sub",state="RESOURCE_ERROR"} 1');
    expect(text).toMatch(/orderly_export_errors_total\{subscription="sub"\} [1-9]/);
    const status = (await (await fetch(`${metrics.url}/status`)).json()) as { state: string; stateReason: string }[];
    expect(status[0]).toMatchObject({ state: 'RESOURCE_ERROR', stateReason: expect.stringContaining(env.duckdbPath) });
  } finally {
    await metrics.close();
  }
  // Retried with backoff (the test's backoff is 20-200 ms) and still failing: nothing acked, nothing nacked.
  await new Promise((r) => setTimeout(r, 500));
  expect(state()).toBe('RESOURCE_ERROR');
  expect(backlog()).toBe(backlogNow);
  expect(env.core.metrics('sub').counters.nacked).toBe(0);
}

describe('a truncated DuckDB export file', () => {
  it('between runs: RESOURCE_ERROR with the reason until the file is restored, then every message once', async () => {
    await start();
    await env.core.publish('orders', batch('a'));
    await waitFor('first export', () => backlog() === 0);
    await env.close(); // closes the database file
    const backup = `${dir.path}/backup.duckdb`;
    copyFileSync(env.duckdbPath, backup);
    truncateSync(env.duckdbPath, 8192);

    await start();
    await env.core.publish('orders', batch('b'));
    await expectVisibleError(50);

    restore(backup, env.duckdbPath);
    await waitFor('ACTIVE again', () => state() === 'ACTIVE' && backlog() === 0);
    await expectRows(['a', 'b']);
    const row = statusOf(env.core, env.exports)[0]!;
    expect(row.stateReason).toBeUndefined();
    expect(row.lastExportError?.message).toContain(env.duckdbPath); // kept after the recovery
  });

  it('while running: no more acks into the destroyed file; RESOURCE_ERROR until it is restored, then every message once', async () => {
    await start();
    await env.core.publish('orders', batch('a'));
    await waitFor('first export', () => backlog() === 0);
    await queryDuckDb(env.duckdbPath, 'CHECKPOINT'); // a consistent backup while running
    const backup = `${dir.path}/backup.duckdb`;
    copyFileSync(env.duckdbPath, backup);
    truncateSync(env.duckdbPath, 0); // DuckDB itself does not notice: its writes would "succeed"

    await env.core.publish('orders', batch('b'));
    await expectVisibleError(50);

    restore(backup, env.duckdbPath);
    await waitFor('ACTIVE again', () => state() === 'ACTIVE' && backlog() === 0);
    await expectRows(['a', 'b']);
  });

  it('rows acked after the backup come back from a seek made before the restore (retained messages)', async () => {
    await start({ retainAckedMessages: true });
    await env.core.publish('orders', batch('a'));
    await waitFor('a exported', () => backlog() === 0);
    await queryDuckDb(env.duckdbPath, 'CHECKPOINT');
    const backup = `${dir.path}/backup.duckdb`;
    copyFileSync(env.duckdbPath, backup);
    await new Promise((r) => setTimeout(r, 20));
    const afterBackup = Date.now();
    await new Promise((r) => setTimeout(r, 20));
    await env.core.publish('orders', batch('b'));
    await waitFor('b exported (into the file that is about to be lost)', () => backlog() === 0);
    truncateSync(env.duckdbPath, 0);
    await env.core.publish('orders', batch('c'));
    await expectVisibleError(50);

    await env.core.seek('sub', afterBackup);
    restore(backup, env.duckdbPath);
    await waitFor('ACTIVE again', () => state() === 'ACTIVE' && backlog() === 0);
    await expectRows(['a', 'b', 'c']);
  });

  it('replaced while running (a backup renamed into place): the writer notices and goes on in the new file', async () => {
    await start();
    await env.core.publish('orders', batch('a'));
    await waitFor('a exported', () => backlog() === 0);
    await queryDuckDb(env.duckdbPath, 'CHECKPOINT');
    const backup = `${dir.path}/backup.duckdb`;
    copyFileSync(env.duckdbPath, backup);
    await env.core.publish('orders', batch('b'));
    await waitFor('b exported (into the file about to be replaced)', () => backlog() === 0);
    restore(backup, env.duckdbPath);

    await env.core.publish('orders', batch('c'));
    await waitFor('c exported', () => backlog() === 0);
    expect(statusOf(env.core, env.exports)[0]!.lastExportError?.message).toContain(`${env.duckdbPath} was replaced by another file`);
    await expectRows(['a', 'c']); // b went with the replaced file (a seek before the restore brings it back)
  });

  it('deleted while running: moved aside on purpose, the export goes on into a new file once its table exists', async () => {
    await start();
    await env.core.publish('orders', batch('a'));
    await waitFor('first export', () => backlog() === 0);
    rmSync(env.duckdbPath);
    rmSync(`${env.duckdbPath}.wal`, { force: true });

    await env.core.publish('orders', batch('b'));
    // Its rows went with the file; a new file has no table until the job's init (or the user) makes it.
    await waitFor('NOT_FOUND', () => state() === 'NOT_FOUND');
    expect(backlog()).toBe(50);
    await queryDuckDb(env.duckdbPath, 'CREATE TABLE orders(data VARCHAR)');
    await waitFor('ACTIVE again', () => state() === 'ACTIVE' && backlog() === 0);
    await expectRows(['b']);
  });

  it('two subscriptions sharing the file both find the new one (each closes only the database it used)', async () => {
    await start();
    await queryDuckDb(env.duckdbPath, 'CREATE TABLE others(data VARCHAR)');
    await env.core.createTopic('others');
    await env.core.createSubscription('other-sub', {
      topic: 'others',
      enableMessageOrdering: true,
      bigqueryConfig: { table: 'p.main.others' },
    });
    await env.exports.sync();
    await env.core.publish('orders', batch('a'));
    await env.core.publish('others', batch('x'));
    await waitFor('first exports', () => backlog() === 0 && env.core.metrics('other-sub').backlogMessages === 0);
    rmSync(env.duckdbPath);
    rmSync(`${env.duckdbPath}.wal`, { force: true });

    await env.core.publish('orders', batch('b'));
    await env.core.publish('others', batch('y'));
    await waitFor('both NOT_FOUND', () => state() === 'NOT_FOUND' && env.core.getSubscription('other-sub').state === 'NOT_FOUND');
    await queryDuckDb(env.duckdbPath, 'CREATE TABLE orders(data VARCHAR); CREATE TABLE others(data VARCHAR)');
    await waitFor('both exported', () => backlog() === 0 && env.core.metrics('other-sub').backlogMessages === 0);
    await expectRows(['b']);
    const others = (await queryDuckDb(env.duckdbPath, 'SELECT data FROM others ORDER BY rowid')).map((r) => String(r.data));
    expect(others.sort()).toEqual(
      batch('y')
        .map((m) => m.data)
        .sort(),
    );
  });
});
