import { describe, expect, it } from 'vitest';
import { OrderlyRunProcess } from '../faults/orderly-run-process.js';
import { orderly } from '../helpers/cli.js';
import { tempDir } from '../helpers/core.js';
import { waitFor } from '../helpers/export.js';
import { startRemote, workerStatus, writeRemoteJob } from '../helpers/fleet.js';
import { startTestS3 } from '../helpers/s3.js';

/** Messages of the key the export never had: enough that their replay spans several deliveries. */
const EARLIER = 3000;
const LATER = 5;

describe('a fleet worker while the remote subscription is sought back', () => {
  it('replaying messages the export never had while its open file holds later ones of their key: each file keeps the key in order', async () => {
    const dir = tempDir('orderly-fleetseek-');
    const s3 = await startTestS3();
    const remote = await startRemote();
    let worker: OrderlyRunProcess | undefined;
    try {
      const bucket = await s3.bucket();
      const admin = remote.client();
      const [topic] = await admin.createTopic('events');
      const [sub] = await topic.createSubscription('events-seek', { enableMessageOrdering: true, retainAckedMessages: true });
      const publisher = admin.topic('events', { messageOrdering: true });
      const publish = (from: number, to: number) =>
        Promise.all(
          Array.from({ length: to - from }, (_, i) => publisher.publishMessage({ data: Buffer.from(`k:${from + i}`), orderingKey: 'k' })),
        );
      const beforeAll = new Date(Date.now() - 1000);
      // The key's earlier messages are acked by a seek forward before any worker runs.
      await publish(0, EARLIER);
      const forward = new Date(Date.now() + 1000);
      await sub.seek(forward);
      await new Promise((r) => setTimeout(r, forward.getTime() - Date.now() + 500));
      const job = writeRemoteJob(
        dir.path,
        remote.host,
        { objectStorage: s3.settings },
        {
          exports: [
            {
              subscription: 'events-seek',
              enableMessageOrdering: true,
              cloudStorageConfig: { bucket, filenamePrefix: 'events/', maxDuration: '600s', textConfig: {} },
            },
          ],
        },
      );
      const w = new OrderlyRunProcess(job, ['--worker-id', 'w1']);
      worker = w;
      await w.ready;
      await publish(EARLIER, EARLIER + LATER);
      await waitFor(
        'the worker to hold the later messages in its open file',
        async () => (await workerStatus(w)).backlog === LATER,
        30_000,
      );
      // Back to before the first message: the replay brings the earlier ones first, then the later again.
      await sub.seek(beforeAll);
      await waitFor(
        'the replay to be exported',
        async () => (await workerStatus(w)).exported >= EARLIER + 2 * LATER && (await remote.backlog('events-seek')) === 0,
        60_000,
      );
      w.kill('SIGTERM');
      expect((await w.exited).code).toBe(0);

      const audit = await orderly('audit', job, 'events-seek', '--json');
      expect(JSON.parse(audit.stdout)).toMatchObject({
        messages: EARLIER + LATER,
        missing: { count: 0 },
        duplicates: { count: 0 },
        outOfOrderInFile: { count: 0 },
        objectErrors: { count: 0 },
      });
      expect(audit.code).toBe(0);
      // By the payloads too: in every object the key goes forward, and each message is there once.
      const seen = new Set<number>();
      for (const name of (await s3.list(bucket)).filter((n) => !n.startsWith('_orderly/'))) {
        const numbers = (await s3.get(bucket, name))
          .toString('utf8')
          .trim()
          .split('\n')
          .map((line) => Number(line.split(':')[1]));
        expect(numbers, name).toEqual([...numbers].sort((a, b) => a - b));
        for (const n of numbers) seen.add(n);
      }
      expect(seen.size).toBe(EARLIER + LATER);
    } finally {
      worker?.kill('SIGKILL');
      await worker?.exited;
      await remote.close();
      await s3.close();
      dir.remove();
    }
  }, 120_000);
});
