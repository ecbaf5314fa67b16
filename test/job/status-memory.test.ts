import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { orderly } from '../helpers/cli.js';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait-for.js';
import { OrderlyRunProcess } from '../faults/orderly-run-process.js';

interface Row {
  subscription: string;
  residentPayload?: string;
  heldMessages: number;
  windowMessages: number;
  exportBudget?: number;
}

const cleanups: (() => void | Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function tableJob(): string {
  const dir = tempDir('orderly-status-memory-');
  cleanups.push(() => dir.remove());
  const job = join(dir.path, 'job.yaml');
  writeFileSync(
    job,
    [
      'projectId: status-memory',
      'dataDir: ./data',
      'duckdb:',
      '  path: ./data/export.duckdb',
      '  init:',
      '    - CREATE TABLE IF NOT EXISTS t(data JSON)',
      'metrics: { port: 0 }',
      'topics: [{ name: orders }]',
      'subscriptions:',
      '  - { name: to-table, topic: orders, enableMessageOrdering: true, bigqueryConfig: { table: status-memory.main.t } }',
      '  - { name: pulled, topic: orders, enableMessageOrdering: true }',
    ].join('\n'),
  );
  return job;
}

async function rows(job: string): Promise<Map<string, Row>> {
  const { stdout, stderr, code } = await orderly('status', job, '--json');
  expect(code, stderr).toBe(0);
  return new Map((JSON.parse(stdout) as Row[]).map((r) => [r.subscription.split('/').pop()!, r]));
}

// Status showed the resident payload bytes but neither what bounds them per subscription (its read-ahead
// window, which a table export lowers to 10,000) nor the export runner's budget.
it("orderly status and /metrics show each subscription's window and held messages, and a running export's budget", async () => {
  const job = tableJob();
  writeFileSync(join(job, '..', 'three.jsonl'), '{"n":1}\n{"n":2}\n{"n":3}\n');
  expect((await orderly('publish', job, '--topic', 'orders', '--file', join(job, '..', 'three.jsonl'))).code).toBe(0);

  const run = new OrderlyRunProcess(job);
  cleanups.push(() => run.kill('SIGKILL'));
  const { metrics } = await run.ready;
  await waitFor('the export', async () => (await rows(job)).get('to-table')?.exportBudget !== undefined, 60_000);
  const running = await rows(job);
  expect(running.get('to-table')).toMatchObject({ windowMessages: 10_000, exportBudget: 10_000 });
  // Nobody pulls `pulled`: its three messages stay in memory, in the core's window; it runs no export.
  await waitFor('the pull subscription read ahead', async () => (await rows(job)).get('pulled')?.heldMessages === 3, 30_000);
  expect((await rows(job)).get('pulled')).toMatchObject({ windowMessages: 20_000, heldMessages: 3 });
  expect(running.get('pulled')!.exportBudget).toBeUndefined();

  const scraped = await (await fetch(`${metrics!}/metrics`)).text();
  expect(scraped).toContain('orderly_window_messages{subscription="to-table"} 10000');
  expect(scraped).toContain('orderly_window_messages{subscription="pulled"} 20000');
  expect(scraped).toContain('orderly_held_messages{subscription="pulled"} 3');
  expect(scraped).toContain('orderly_export_budget_messages{subscription="to-table"} 10000');
  expect(scraped).not.toContain('orderly_export_budget_messages{subscription="pulled"}');

  // The table a person reads has them too, beside the resident payload.
  const table = await orderly('status', job);
  expect(table.code, table.stderr).toBe(0);
  expect(table.stdout).toMatch(/residentPayload.*heldMessages.*windowMessages.*exportBudget/);
  run.kill('SIGTERM');
  expect((await run.exited).code, run.output()).toBe(0);
});
