import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { ReceivedMessage } from '../../src/core/message.js';
import { RemoteSource } from '../../src/connector/sources/remote-source.js';
import { loadJob } from '../../src/job/job-config.js';
import { JobRuntime } from '../../src/job/job-runtime.js';
import { createLogger } from '../../src/log.js';
import { orderly } from '../helpers/cli.js';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait-for.js';
import { PROJECT, publishKeyed, startRemote, writeRemoteJob } from '../helpers/fleet.js';

let remote: Awaited<ReturnType<typeof startRemote>>;

beforeAll(async () => {
  remote = await startRemote();
}, 60_000);

afterAll(async () => {
  await remote?.close();
});

// Google's client sends acks in batches of at most 3,000: the ack that overflows a batch is queued only once
// the full batch's RPC returns, and a close meanwhile dropped it. A worker stops right after acking its final
// flush, which can be more than 3,000 messages: every one of them must reach the endpoint.
it('a stopping worker acks everything it acked just before the stop, beyond one ack batch', async () => {
  const count = 3_500;
  const client = remote.client();
  const [topic] = await client.createTopic('stop-acks');
  await topic.createSubscription('stop-acks', { enableMessageOrdering: true });
  await publishKeyed(client, 'stop-acks', count, 50);

  const source = new RemoteSource({
    client,
    endpoint: { endpoint: remote.host, projectId: PROJECT },
    subscription: `projects/${PROJECT}/subscriptions/stop-acks`,
    ordered: true,
    section: {},
    budget: { messages: 10_000, bytes: 64 << 20 },
    maxExtensionMinutes: 10,
    streams: 1,
    logger: createLogger({ level: 'silent' }),
  });
  await source.prepare();
  const received: ReceivedMessage[] = [];
  const handle = source.attach({ room: () => ({ messages: 10_000, bytes: 64 << 20 }), deliver: (batch) => received.push(...batch) });
  await waitFor(`${count} messages delivered`, () => received.length === count, 30_000);

  await handle.acknowledge(received.map((r) => r.ackId));
  await handle.detach();
  expect(await remote.backlog('stop-acks')).toBe(0);
}, 60_000);

// A second start of a running worker's id is refused; its way out used to remove the running worker's
// folder (lock, store, spill files), after which a third start ran beside it as the same worker.
it("a start refused because the worker id is running leaves that worker's folder alone", async () => {
  const dir = tempDir('orderly-worker-twice-');
  try {
    const [topic] = await remote.client().createTopic('twice');
    await topic.createSubscription('twice', { enableMessageOrdering: true });
    const file = writeRemoteJob(
      dir.path,
      remote.host,
      { duckdb: { path: join(dir.path, 'export.duckdb'), init: ['CREATE TABLE IF NOT EXISTS events(data VARCHAR)'] } },
      { exports: [{ subscription: 'twice', enableMessageOrdering: true, bigqueryConfig: { table: 'p.main.events' } }] },
    );
    const worker = await JobRuntime.start(loadJob(file), createLogger({ level: 'silent' }), { workerId: 'w1' });
    const folder = join(dir.path, 'data', 'workers', 'w1');
    const before = readdirSync(folder).sort();
    expect(before).toContain('orderly.lock');
    const second = await orderly('run', file, '--worker-id', 'w1');
    expect(second.code).not.toBe(0);
    expect(second.stderr).toContain(`the data directory ${folder} is in use by a running job (pid ${process.pid})`);
    expect(readdirSync(folder).sort()).toEqual(before);
    await worker.stop();
    expect(existsSync(folder)).toBe(false);
  } finally {
    dir.remove();
  }
}, 60_000);
