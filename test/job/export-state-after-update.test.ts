import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { orderly } from '../helpers/cli.js';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait-for.js';
import { OrderlyRunProcess } from '../faults/orderly-run-process.js';

const PROJECT = 'state-update';

interface Row {
  subscription: string;
  state: string;
  stateReason?: string;
  backlog: number;
  exported: number;
}

const cleanups: (() => void | Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe("an export subscription's state once its export config is changed at runtime", () => {
  it("is the new sink's state (ACTIVE once it writes), and ACTIVE once it no longer exports, not the last runner's NOT_FOUND", async () => {
    const dir = tempDir('orderly-state-update-');
    cleanups.push(() => dir.remove());
    const job = join(dir.path, 'job.yaml');
    writeFileSync(
      job,
      [
        `projectId: ${PROJECT}`,
        'dataDir: ./data',
        'duckdb:',
        '  path: ./data/export.duckdb',
        '  init:',
        '    - CREATE SCHEMA IF NOT EXISTS a',
        '    - CREATE TABLE IF NOT EXISTS a.t(data VARCHAR)',
        'metrics: { port: 0 }',
        'endpoint: { port: 0 }',
        'topics: [{ name: orders }]',
      ].join('\n'),
    );
    const run = new OrderlyRunProcess(job);
    cleanups.push(() => run.kill('SIGKILL'));
    const { port } = await run.ready;
    const api = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`http://127.0.0.1:${port}/v1/projects/${PROJECT}/${path}`, {
        method,
        headers: { 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const answer = (await res.json()) as { state?: string };
      expect(res.status, JSON.stringify(answer)).toBe(200);
      return answer;
    };
    const status = async (id: string): Promise<Row> => {
      const { stdout, stderr, code } = await orderly('status', job, '--json');
      expect(code, stderr).toBe(0);
      return (JSON.parse(stdout) as Row[]).find((r) => r.subscription.endsWith(`/${id}`))!;
    };
    const missing = { table: `${PROJECT}.a.missing` };
    for (const id of ['retargeted', 'unexported'])
      await api('PUT', `subscriptions/${id}`, { topic: `projects/${PROJECT}/topics/orders`, bigqueryConfig: missing });
    for (const id of ['retargeted', 'unexported'])
      await waitFor(`${id} NOT_FOUND`, async () => (await status(id)).state === 'NOT_FOUND', 60_000);

    await api('PATCH', 'subscriptions/retargeted', {
      subscription: { bigqueryConfig: { table: `${PROJECT}.a.t` } },
      updateMask: 'bigqueryConfig',
    });
    await api('PATCH', 'subscriptions/unexported', { subscription: { bigqueryConfig: null }, updateMask: 'bigqueryConfig' });
    await api('POST', 'topics/orders:publish', { messages: [{ data: Buffer.from('one').toString('base64') }] });
    // The new table takes the message; before, the subscription said NOT_FOUND meanwhile, and for good.
    await waitFor('the message exported', async () => (await status('retargeted')).exported === 1, 60_000);
    expect(await status('retargeted')).toMatchObject({ state: 'ACTIVE', backlog: 0 });
    expect((await api('GET', 'subscriptions/retargeted')).state).toBe('ACTIVE');
    // A pull subscription now: no sink, so nothing it could be NOT_FOUND or RESOURCE_ERROR for.
    await waitFor('the pull subscription ACTIVE', async () => (await status('unexported')).state === 'ACTIVE', 20_000);
    expect(await status('unexported')).toMatchObject({ state: 'ACTIVE', backlog: 1 });
    expect((await api('GET', 'subscriptions/unexported')).state).toBe('ACTIVE');

    run.kill('SIGTERM');
    expect((await run.exited).code, run.output()).toBe(0);
  });
});
