import { CopyObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { describe, expect, it } from 'vitest';
import { fleetManifestPrefix, readFleetManifest } from '../../connectors/object-storage/bucket-manifest.js';
import { createS3Client, s3Connection } from '../../connectors/object-storage/s3-client.js';
import { pathSegment } from '../../src/connector/sink-paths.js';
import { remoteIdentity } from '../../src/connector/sources/remote-names.js';
import { loadJob } from '../../src/job/job-config.js';
import { JobRuntime } from '../../src/job/job-runtime.js';
import { createLogger } from '../../src/log.js';
import { orderly } from '../helpers/cli.js';
import { waitFor } from '../helpers/wait-for.js';
import { openObjectFleetScene, PROJECT, publishKeyed } from '../helpers/fleet.js';

const MESSAGES = 600;
const SUBSCRIPTION = `projects/${PROJECT}/subscriptions/events-to-parquet`;

describe("orderly query over a fleet's Parquet export", () => {
  it("reads every worker's objects from the manifest in the bucket, each message once (a redelivered copy left out)", async () => {
    const scene = await openObjectFleetScene('orderly-fleet-query-');
    const { s3, remote } = scene;
    try {
      const bucket = await s3.bucket();
      const [topic] = await remote.client().createTopic('events');
      await topic.createSubscription('events-to-parquet', { enableMessageOrdering: true });
      const file = scene.job({
        exports: [
          {
            subscription: 'events-to-parquet',
            cloudStorageConfig: { bucket, filenameDatetimeFormat: 'YYYY-MM-DDThh:mm:ssZ', parquetConfig: { writeMetadata: true } },
          },
        ],
      });
      // Two workers in this process; a third process queries.
      const job = loadJob(file);
      const workers = await Promise.all(
        ['q1', 'q2'].map((workerId) => JobRuntime.start(job, createLogger({ level: 'silent' }), { workerId })),
      );
      await publishKeyed(remote.client(), 'events', MESSAGES, 30);
      const held = () => workers.reduce((n, w) => n + (w.exports.remoteExports().get(SUBSCRIPTION)?.outstanding ?? 0), 0);
      await waitFor('every message delivered', async () => (await remote.backlog('events-to-parquet')) === held(), 30_000);
      for (const w of workers) await w.stop();

      // A redelivered copy: another worker's object holding the same messages, opened later.
      const client = createS3Client(s3Connection(s3.settings));
      const [first] = await readFleetManifest(client, bucket, { name: SUBSCRIPTION, uid: remoteIdentity(SUBSCRIPTION).uid });
      const copy = `${first!.object}-copy`;
      await client.send(new CopyObjectCommand({ Bucket: bucket, Key: copy, CopySource: `${bucket}/${first!.object}` }));
      const entry = { ...first!, object: copy, worker: 'q3', createdAt: new Date(Date.parse(first!.createdAt) + 1000).toISOString() };
      const prefix = fleetManifestPrefix({ name: SUBSCRIPTION, uid: remoteIdentity(SUBSCRIPTION).uid });
      await client.send(
        new PutObjectCommand({ Bucket: bucket, Key: `${prefix}committed/${pathSegment(copy)}.json`, Body: JSON.stringify(entry) }),
      );
      client.destroy();

      const query = async (sql: string) => {
        const r = await orderly('query', file, sql, '--json');
        expect(r.stderr).toBe('');
        return JSON.parse(r.stdout) as Record<string, string>[];
      };
      // Without the view's rule the copy's rows would count twice.
      expect(first!.records).toBeGreaterThan(0);
      const [totals] = await query('SELECT count(*) AS n, count(DISTINCT message_id) AS ids FROM events_to_parquet');
      expect(totals).toEqual({ n: String(MESSAGES), ids: String(MESSAGES) });
      const copies = await query(`SELECT count(*) AS n FROM events_to_parquet WHERE filename LIKE '%copy%'`);
      expect(copies).toEqual([{ n: '0' }]);
    } finally {
      await scene.close();
    }
  }, 120_000);
});
