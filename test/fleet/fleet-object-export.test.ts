import { describe, expect, it } from 'vitest';
import { readFleetManifest } from '../../connectors/object-storage/bucket-manifest.js';
import { manifestView } from '../../connectors/object-storage/manifest-view.js';
import { createS3Client, s3Connection } from '../../connectors/object-storage/s3-client.js';
import { remoteIdentity } from '../../src/connector/sources/remote-names.js';
import { OrderlyRunProcess } from '../faults/orderly-run-process.js';
import { orderly } from '../helpers/cli.js';
import { waitFor } from '../helpers/wait-for.js';
import { openObjectFleetScene, PROJECT, publishKeyed, workerStatus } from '../helpers/fleet.js';

const MESSAGES = 20_000;
const KEYS = 500;
const SUBSCRIPTION = `projects/${PROJECT}/subscriptions/events-to-files`;

describe('a fleet of workers exports one remote subscription to object storage', () => {
  it('three `orderly run` workers, one SIGKILLed mid-run and restarted: every message once in the manifest view, in order in every file', async () => {
    const scene = await openObjectFleetScene('orderly-fleet-');
    const { s3, remote } = scene;
    const workers: OrderlyRunProcess[] = [];
    try {
      const bucket = await s3.bucket();
      const admin = remote.client();
      const [topic] = await admin.createTopic('events');
      await topic.createSubscription('events-to-files', { enableMessageOrdering: true, ackDeadlineSeconds: 10 });
      const job = scene.job({
        // A small share per worker, so the three split the stream and files roll often (at a quarter of it).
        flowControl: { maxMessages: 2000 },
        exports: [
          {
            subscription: 'events-to-files',
            enableMessageOrdering: true,
            cloudStorageConfig: { bucket, filenamePrefix: 'events/', filenameDatetimeFormat: 'YYYY-MM-DDThh:mm:ssZ', textConfig: {} },
          },
        ],
      });
      const start = (id: string) => {
        const child = scene.worker(job, ['--worker-id', id]);
        workers.push(child);
        return child;
      };
      await Promise.all(['w1', 'w2', 'w3'].map((id) => start(id).ready));

      let victim = workers[1]!;
      await publishKeyed(remote.client(), 'events', MESSAGES, KEYS, (published) => {
        // Mid-run: the second worker dies holding messages (open files, uploads) and comes back.
        if (published === MESSAGES / 2) victim.kill('SIGKILL');
      });
      expect((await victim.exited).signal).toBe('SIGKILL');
      victim = start('w2');
      await victim.ready;

      // Everything delivered: what the server has not seen acked, the live workers hold (the killed
      // worker's leases expired and went to the others). Then a clean stop finalizes and acks it all.
      const live = workers.filter((w) => w !== workers[1]);
      await waitFor(
        'every unacked message to be held by a live worker',
        async () => {
          const held = (await Promise.all(live.map(workerStatus))).reduce((n, s) => n + s.backlog, 0);
          return (await remote.backlog('events-to-files')) === held;
        },
        120_000,
      );
      for (const w of live) w.kill('SIGTERM');
      for (const w of live) expect((await w.exited).code).toBe(0);
      await waitFor('the server to see every message acked', async () => (await remote.backlog('events-to-files')) === 0, 30_000);

      // A fourth process, with no worker running: the audit reads the manifest from the bucket.
      const audit = await orderly('audit', job, 'events-to-files', '--json');
      expect(audit.stderr).toBe('');
      const report = JSON.parse(audit.stdout);
      expect(report).toMatchObject({
        messages: MESSAGES,
        missing: { count: 0 },
        duplicates: { count: 0 },
        outOfOrderInFile: { count: 0 },
        objectErrors: { count: 0 },
      });
      expect(report.workers).toEqual(expect.arrayContaining(['w1', 'w2', 'w3']));
      expect(audit.code).toBe(0);

      // Independently: the bucket as the minio client lists it holds exactly the manifest's objects, and
      // read back (with minio), the view holds every published message once, each key in order per file.
      const client = createS3Client(s3Connection(s3.settings));
      const entries = await readFleetManifest(client, bucket, { name: SUBSCRIPTION, uid: remoteIdentity(SUBSCRIPTION).uid });
      client.destroy();
      const listed = (await s3.list(bucket)).filter((name) => !name.startsWith('_orderly/'));
      expect(listed).toEqual(entries.map((e) => e.object).sort());
      const view = manifestView(entries);
      const seen = new Map<string, number>();
      for (const { entry, counts } of view.objects) {
        const lines = (await s3.get(bucket, entry.object)).toString('utf8').replace(/\n$/, '').split('\n');
        expect(lines).toHaveLength(entry.messages!.length);
        const lastInFile = new Map<string, number>();
        lines.forEach((line, i) => {
          if (!counts[i]) return;
          const [key, seq] = line.split(':');
          expect(entry.messages![i]![1]).toBe(key);
          expect(Number(seq)).toBeGreaterThan(lastInFile.get(key!) ?? -1);
          lastInFile.set(key!, Number(seq));
          seen.set(line, (seen.get(line) ?? 0) + 1);
        });
      }
      expect(seen.size).toBe(MESSAGES);
      expect([...seen.values()].every((n) => n === 1)).toBe(true);
    } finally {
      await scene.close();
    }
  }, 240_000);
});
