import { expect, it } from 'vitest';
import { waitFor } from '../helpers/wait-for.js';
import { openObjectFleetScene, PROJECT, publishKeyed, workerStatus } from '../helpers/fleet.js';

const KEYS = 20;
const PER_KEY = 10;

// An endpoint that stops answering without refusing connections (a frozen process, a network partition that
// drops packets): the lease extensions of what the worker held timed out with DEADLINE_EXCEEDED, which was
// taken for a routine end of a stream. Status said `streaming`, the log said nothing, for as long as it lasted.
it('an endpoint that stops answering while a worker holds messages: retrying, naming the endpoint; streaming again once it answers', async () => {
  const scene = await openObjectFleetScene('orderly-frozen-endpoint-');
  const { s3, remote } = scene;
  try {
    const [topic] = await remote.client().createTopic('events');
    await topic.createSubscription('held', { enableMessageOrdering: true, ackDeadlineSeconds: 10 });
    const bucket = await s3.bucket();
    const job = scene.job({
      // The file stays open (and its messages leased) until the worker stops.
      idleFlushSeconds: 600,
      exports: [
        {
          subscription: 'held',
          enableMessageOrdering: true,
          cloudStorageConfig: { bucket, filenamePrefix: 'events/', maxDuration: '600s', textConfig: {} },
        },
      ],
    });
    const w = scene.worker(job, ['--worker-id', 'w1']);
    await w.ready;
    await publishKeyed(remote.client(), 'events', KEYS * PER_KEY, KEYS);
    // publishKeyed's payloads, `key:seq`.
    const published = Array.from({ length: KEYS * PER_KEY }, (_, i) => `k${i % KEYS}:${Math.floor(i / KEYS)}`);
    await waitFor('the worker to hold a message of every key', async () => (await workerStatus(w)).keysInFlight === KEYS, 30_000);

    remote.child.kill('SIGSTOP');
    try {
      await waitFor(
        'the worker to see the endpoint does not answer',
        async () => (await workerStatus(w)).source.state === 'retrying',
        60_000,
      );
      const { source } = await workerStatus(w);
      expect(source.error).toMatch(
        new RegExp(
          `^cannot reach the Pub/Sub endpoint ${remote.host} for subscription projects/${PROJECT}/subscriptions/held \\(DEADLINE_EXCEEDED: `,
        ),
      );
      expect(w.output()).toContain('cannot reach the Pub/Sub endpoint');
      await waitFor('an attempt to reach the endpoint to fail', async () => (await workerStatus(w)).source.retries >= 1, 60_000);
    } finally {
      remote.child.kill('SIGCONT');
    }
    await waitFor('the worker to stream again', async () => (await workerStatus(w)).source.state === 'streaming', 60_000);
    // `retries` counts failed attempts since the source last streamed: it kept counting the outage's.
    expect((await workerStatus(w)).source).toEqual({ location: remote.host, state: 'streaming', retries: 0, keysWaiting: 0 });

    w.kill('SIGTERM');
    expect((await w.exited).code).toBe(0);
    const lines: string[] = [];
    for (const name of (await s3.list(bucket)).filter((n) => n.startsWith('events/')))
      lines.push(...(await s3.get(bucket, name)).toString().trim().split('\n'));
    // Each published message at least once (the leases that lapsed meanwhile may bring copies).
    expect([...new Set(lines)].sort()).toEqual([...published].sort());
  } finally {
    await scene.close();
  }
}, 240_000);
