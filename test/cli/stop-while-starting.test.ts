import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/temp-dir.js';
import { OrderlyRunProcess } from '../faults/orderly-run-process.js';

const cleanups: (() => void | Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('orderly run stopped while it starts', () => {
  it.each(['SIGINT', 'SIGTERM'] as const)('stops cleanly on %s sent before the job runs: logged, exit 0, lock released', async (signal) => {
    const dir = tempDir('orderly-stop-starting-');
    cleanups.push(() => dir.remove());
    const job = join(dir.path, 'job.yaml');
    // A DuckDB table export: loading DuckDB and opening its file make the start long enough to signal into.
    writeFileSync(
      job,
      [
        'projectId: stop-starting',
        'dataDir: ./data',
        'duckdb:',
        '  path: ./data/export.duckdb',
        '  init: [CREATE TABLE IF NOT EXISTS t(data VARCHAR)]',
        'topics: [{ name: orders }]',
        'subscriptions:',
        '  - { name: to-table, topic: orders, bigqueryConfig: { table: stop-starting.main.t } }',
      ].join('\n'),
    );
    const run = new OrderlyRunProcess(job);
    cleanups.push(() => run.kill('SIGKILL'));
    await run.starting;
    run.kill(signal);
    // Before: Node's default handler ended the process by the signal, nothing logged, the lock left behind.
    expect(await run.exited, run.output()).toEqual({ code: 0, signal: null });
    expect(run.output()).toMatch(/"msg":"stopped"/);
    expect(existsSync(join(dir.path, 'data', 'orderly.lock'))).toBe(false);
  });
});
