import { expect, it } from 'vitest';
import { waitFor } from '../helpers/wait-for.js';
import { openObjectFleetScene, workerStatus } from '../helpers/fleet.js';

const KEYS = 50;
const PER_KEY = 70;

// The worker writes its open file at the stop and acks it, but the endpoint is gone: Google's client then
// retried the acks past the first request's 3,000 for about 90 s after "stopped", keeping the process
// alive with its lock already released.
it('a worker stopped while its endpoint is gone writes what it holds and exits within seconds', async () => {
  const scene = await openObjectFleetScene('orderly-stop-gone-');
  const { s3, remote } = scene;
  try {
    const [topic] = await remote.client().createTopic('events');
    await topic.createSubscription('held', { enableMessageOrdering: true, ackDeadlineSeconds: 20 });
    const bucket = await s3.bucket();
    const job = scene.job({
      idleFlushSeconds: 600,
      streams: 1,
      flowControl: { maxMessages: 100_000 },
      exports: [
        {
          subscription: 'held',
          enableMessageOrdering: true,
          cloudStorageConfig: {
            bucket,
            filenamePrefix: 'events/',
            filenameDatetimeFormat: 'YYYY-MM-DDThh:mm:ssZ',
            maxDuration: '600s',
            textConfig: {},
          },
        },
      ],
    });
    const worker = scene.worker(job);
    await worker.ready;
    // Each key's messages in one publish request, so each key's are delivered together (an ordered key's
    // next ones wait for its earlier ones' acks): more than one ack request's worth is held.
    const publisher = remote.client().topic('events', { messageOrdering: true, batching: { maxMessages: 1000, maxMilliseconds: 200 } });
    await Promise.all(
      Array.from({ length: KEYS * PER_KEY }, (_, i) =>
        publisher.publishMessage({ data: Buffer.from(`k${i % KEYS}:${Math.floor(i / KEYS)}`), orderingKey: `k${i % KEYS}` }),
      ),
    );
    await waitFor('the open file to hold every message', async () => (await workerStatus(worker)).backlog === KEYS * PER_KEY, 30_000);
    remote.child.kill('SIGKILL');
    await waitFor('the endpoint gone', () => remote.child.exitCode !== null || remote.child.signalCode !== null);
    const stopping = Date.now();
    worker.kill('SIGTERM');
    const { code } = await worker.exited;
    expect(Date.now() - stopping).toBeLessThan(20_000);
    expect(code).toBe(0);
    const lines: string[] = [];
    for (const name of (await s3.list(bucket)).filter((n) => n.startsWith('events/')))
      lines.push(...(await s3.get(bucket, name)).toString().trim().split('\n'));
    expect(lines.sort()).toEqual(Array.from({ length: KEYS * PER_KEY }, (_, i) => `k${i % KEYS}:${Math.floor(i / KEYS)}`).sort());
  } finally {
    await scene.close();
  }
}, 150_000);
