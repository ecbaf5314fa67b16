import { writeFileSync } from 'node:fs';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { orderly } from '../helpers/cli.js';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait-for.js';
import { OrderlyRunProcess } from './orderly-run-process.js';

const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

/** A push endpoint that takes each request and holds it unanswered. */
async function hangingEndpoint() {
  const held: ServerResponse[] = [];
  const server = createServer((req, res) => {
    req.resume();
    held.push(res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanups.push(() => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/push`, held };
}

async function pushRow(job: string): Promise<{ pushStalled?: string; acked: number }> {
  const { stdout } = await orderly('status', job, '--json');
  return JSON.parse(stdout)[0];
}

describe('orderly status of a push endpoint that takes requests and never answers', () => {
  it('shows pushStalled (and orderly_push_stalled 1 on /metrics) while a request has waited push.stallSeconds, and not once it is answered', async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const endpoint = await hangingEndpoint();
    const job = join(dir.path, 'job.yaml');
    writeFileSync(
      job,
      `dataDir: ./data
durability: process
metrics: { port: 0 }
endpoint: { port: 0 }
push: { stallSeconds: 2 }
topics: [{ name: orders }]
subscriptions:
  - name: orders-push
    topic: orders
    ackDeadlineSeconds: 600
    pushConfig: { pushEndpoint: "${endpoint.url}?token=push-secret" }
`,
    );
    const run = new OrderlyRunProcess(job);
    cleanups.push(() => {
      run.kill('SIGTERM');
      return run.exited;
    });
    const { metrics } = await run.ready;
    // Prometheus alerts read /metrics, not status: the stall shows there too, as an export's does.
    const pushStalledGauge = async () =>
      /^orderly_push_stalled\{subscription="orders-push"\} (\d+)$/m.exec(await (await fetch(`${metrics!}/metrics`)).text())?.[1];
    expect(await pushStalledGauge()).toBe('0');
    writeFileSync(join(dir.path, 'in.jsonl'), '{"order":1}\n');
    expect((await orderly('publish', job, '--topic', 'orders', '--file', join(dir.path, 'in.jsonl'))).code).toBe(0);
    await waitFor('the push request', () => endpoint.held.length === 1);

    // Nothing fails until the ack deadline (600 s) ends the request: before, status showed nothing wrong.
    let row: Awaited<ReturnType<typeof pushRow>> | undefined;
    await waitFor('pushStalled in status', async () => (row = await pushRow(job)).pushStalled !== undefined, 30_000);
    expect(row!.pushStalled).toMatch(
      new RegExp(`^1 push request\\(s\\) to ${endpoint.url} unanswered for 2 s or more, the oldest for \\d+ s$`),
    );
    // The endpoint without its query: the token a push URL carries is a credential.
    expect(row!.pushStalled).not.toContain('push-secret');
    expect(await pushStalledGauge()).toBe('1');

    endpoint.held[0]!.writeHead(200).end();
    await waitFor('the ack, and pushStalled gone', async () => {
      row = await pushRow(job);
      return row.acked === 1 && row.pushStalled === undefined;
    });
    expect(await pushStalledGauge()).toBe('0');
  }, 180_000);
});
