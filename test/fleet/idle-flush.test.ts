import type { PubSub } from '@google-cloud/pubsub';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OrderlyRunProcess } from '../faults/orderly-run-process.js';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait-for.js';
import { startRemote, workerStatus, writeRemoteJob } from '../helpers/fleet.js';
import { startTestS3, type TestS3 } from '../helpers/s3.js';

/**
 * With ordering, Pub/Sub sends a key's next messages only once its earlier ones are acked, and a worker acks
 * what an open file holds only once the file is written. A file that no more messages can fill (its keys
 * are all waiting on it) used to stay open until maxDuration (here 10 minutes): the keys stalled that long.
 */
const KEYS = ['a', 'b', 'c', 'd', 'e'];

let remote: Awaited<ReturnType<typeof startRemote>>;
let s3: TestS3;
const dirs: ReturnType<typeof tempDir>[] = [];
const workers: OrderlyRunProcess[] = [];

beforeAll(async () => {
  [remote, s3] = await Promise.all([startRemote(), startTestS3()]);
  await remote.client().createTopic('events');
}, 60_000);

afterAll(async () => {
  for (const w of workers) w.kill('SIGKILL');
  await remote?.close();
  await s3?.close();
  for (const d of dirs) d.remove();
});

async function publishRound(client: PubSub, round: number): Promise<void> {
  const topic = client.topic('events', { messageOrdering: true });
  await Promise.all(KEYS.map((key) => topic.publishMessage({ data: Buffer.from(`${key}:${round}`), orderingKey: key })));
}

/**
 * A worker exporting a new ordered subscription of `events` to text files that roll only after 10 minutes or 5,000
 * messages; its job asks for per-key order unless `jobOrdering` is false.
 */
async function exportWith(subscription: string, idleFlushSeconds: number, jobOrdering = true) {
  const dir = tempDir('orderly-idle-flush-');
  dirs.push(dir);
  await remote.client().topic('events').createSubscription(subscription, { enableMessageOrdering: true });
  const bucket = await s3.bucket();
  const job = writeRemoteJob(
    dir.path,
    remote.host,
    { objectStorage: s3.settings },
    {
      idleFlushSeconds,
      exports: [
        {
          subscription,
          ...(jobOrdering ? { enableMessageOrdering: true } : {}),
          cloudStorageConfig: { bucket, filenameDatetimeFormat: 'YYYY-MM-DDThh:mm:ssZ', maxDuration: '600s', textConfig: {} },
        },
      ],
    },
  );
  const worker = new OrderlyRunProcess(job);
  workers.push(worker);
  await worker.ready;
  return { worker, bucket };
}

describe('an ordered remote export whose open file no more messages can fill', () => {
  it('is finalized after idleFlushSeconds without a delivery, so its keys move on', async () => {
    const { worker, bucket } = await exportWith('idle-1s', 1);
    const client = remote.client();
    await publishRound(client, 1);
    await waitFor('the first round committed', async () => (await workerStatus(worker)).exported === KEYS.length, 30_000);
    // Each key's second message could only come once its first was acked, i.e. once that file was written.
    await publishRound(client, 2);
    await waitFor('every message acked', async () => (await remote.backlog('idle-1s')) === 0, 30_000);
    expect((await workerStatus(worker)).exported).toBe(2 * KEYS.length);
    // The data objects (the fleet's manifest lives in the bucket too, under _orderly/).
    const objects = (await s3.list(bucket)).filter((o) => !o.startsWith('_orderly/'));
    expect(objects.length).toBeGreaterThanOrEqual(2);
    const lines = (await Promise.all(objects.map(async (o) => (await s3.get(bucket, o)).toString().trim().split('\n')))).flat();
    expect(lines.sort()).toEqual(KEYS.flatMap((k) => [`${k}:1`, `${k}:2`]).sort());
  }, 90_000);

  // The idle flush followed the job's enableMessageOrdering (false unless given), not the subscription's own
  // ordering, which is what holds a key's next messages back: keys waited for maxDuration (300 s by default).
  it('is finalized also when the job does not ask for per-key order: the subscription is ordered all the same', async () => {
    const { worker } = await exportWith('idle-job-unordered', 1, false);
    const client = remote.client();
    await publishRound(client, 1);
    await waitFor('the first round committed', async () => (await workerStatus(worker)).exported === KEYS.length, 30_000);
    await publishRound(client, 2);
    await waitFor('every message acked', async () => (await remote.backlog('idle-job-unordered')) === 0, 30_000);
    expect((await workerStatus(worker)).exported).toBe(2 * KEYS.length);
  }, 90_000);

  it('idleFlushSeconds: 0 leaves the file to its own limits: what it holds stays unwritten', async () => {
    const { worker } = await exportWith('idle-off', 0);
    await publishRound(remote.client(), 1);
    await waitFor('the worker to hold the first round', async () => (await workerStatus(worker)).backlog === KEYS.length, 30_000);
    // Several flush intervals and the 1 s idle time of the case above pass: nothing is finalized.
    await new Promise((r) => setTimeout(r, 4000));
    const status = await workerStatus(worker);
    expect(status.exported).toBe(0);
    expect(status.backlog).toBe(KEYS.length);
  }, 90_000);
});
