import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { orderly } from '../helpers/cli.js';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait-for.js';
import { OrderlyRunProcess } from '../faults/orderly-run-process.js';

interface Row {
  subscription: string;
  state: string;
  stateReason?: string;
  backlog: number;
}

const cleanups: (() => void | Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** The export's row of `orderly status --json`. */
async function statusOf(job: string): Promise<Row> {
  const { stdout, stderr, code } = await orderly('status', job, '--json');
  expect(code, stderr).toBe(0);
  return (JSON.parse(stdout) as Row[]).find((r) => r.subscription.endsWith('/to-table'))!;
}

/** `orderly run job` until `until` holds for the export's row of its /status, then stopped with SIGTERM. */
async function runUntil(job: string, until: (row: Row) => boolean): Promise<void> {
  const run = new OrderlyRunProcess(job);
  cleanups.push(() => run.kill('SIGKILL'));
  await run.ready;
  await waitFor('the export state', async () => until(await statusOf(job)), 60_000);
  run.kill('SIGTERM');
  expect((await run.exited).code, run.output()).toBe(0);
}

describe('orderly status with no job running', () => {
  it("shows an export's sink state as the job last saw it, not ACTIVE for a table it could not write to", async () => {
    const dir = tempDir('orderly-offline-state-');
    cleanups.push(() => dir.remove());
    const job = join(dir.path, 'job.yaml');
    writeFileSync(
      job,
      [
        'projectId: offline-state',
        'dataDir: ./data',
        'duckdb:',
        '  path: ./data/export.duckdb',
        '  init:',
        '    - CREATE SCHEMA IF NOT EXISTS a',
        '    - CREATE TABLE IF NOT EXISTS a.t(data INTEGER)',
        'metrics: { port: 0 }',
        'topics: [{ name: orders }]',
        'subscriptions:',
        '  - { name: to-table, topic: orders, bigqueryConfig: { table: offline-state.a.t } }',
      ].join('\n'),
    );
    writeFileSync(join(dir.path, 'one.jsonl'), '{"n":1}\n');
    expect((await orderly('publish', job, '--topic', 'orders', '--file', join(dir.path, 'one.jsonl'))).code).toBe(0);

    await runUntil(job, (row) => row.state === 'SCHEMA_MISMATCH');
    const stopped = await statusOf(job);
    // Before: ACTIVE and no reason, with the note saying states were "as last stored" (none were).
    expect(stopped).toMatchObject({ state: 'SCHEMA_MISMATCH', backlog: 1 });
    expect(stopped.stateReason).toMatch(/table offline-state\.a\.t: column data is INTEGER/);

    // The table fixed while the job is stopped: the next run writes to it, and status says so once it stops.
    const fixed = await orderly('query', job, '--write', 'ALTER TABLE a.t ALTER data TYPE VARCHAR');
    expect(fixed.code, fixed.stderr).toBe(0);
    await runUntil(job, (row) => row.state === 'ACTIVE' && row.backlog === 0);
    const after = await statusOf(job);
    expect(after).toMatchObject({ state: 'ACTIVE', backlog: 0 });
    expect(after.stateReason).toBeUndefined();
  });
});
