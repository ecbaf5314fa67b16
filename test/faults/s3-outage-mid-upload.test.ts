import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseObjectStorageConfig } from '../../connectors/object-storage/config.js';
import { auditSubscription } from '../../connectors/object-storage/audit.js';
import { Manifest } from '../../connectors/object-storage/manifest.js';
import { manifestPath } from '../../connectors/object-storage/object-writer.js';
import { statusOf } from '../../src/job/metrics.js';
import { tempDir } from '../helpers/temp-dir.js';
import { openExport } from '../helpers/export.js';
import { waitFor } from '../helpers/wait-for.js';
import { startTestS3 } from '../helpers/s3.js';
import { checkDelivery, readParquetObjects, restoredBySequence } from './delivery-check.js';
import { startObservingProxy } from './observing-proxy.js';

const MiB = 1024 * 1024;
const MESSAGE_BYTES = 256 * 1024;
/** The file rolls (and its multipart upload, in 8 MiB parts, starts) at this size. */
const FILE_BYTES = 48 * MiB;
const KEYS = 16;
const SUBSCRIPTION = 'projects/p/subscriptions/to-s3';

/** `count` messages over KEYS keys; the payload starts with "<key>:<per-key counter>:", then random bytes (Parquet does not compress them away). */
function messages(from: number, count: number) {
  return Array.from({ length: count }, (_, j) => {
    const i = from + j;
    const key = `key-${i % KEYS}`;
    const head = `${key}:${Math.floor(i / KEYS)}:`;
    return { orderingKey: key, data: Buffer.concat([Buffer.from(head), randomBytes(MESSAGE_BYTES - head.length)]) };
  });
}

/** The manifest's raw lines: which objects were marked pending and which committed. */
function manifestLines(path: string): { type: string; object: string }[] {
  try {
    return readFileSync(path, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { type: string; object: string });
  } catch {
    return [];
  }
}

describe('an S3 outage in the middle of a multipart upload', () => {
  // The outage is made by stopping the S3 server, which only the local s3rver allows (not an external S3_ENDPOINT).
  it.skipIf(process.env.S3_ENDPOINT !== undefined)(
    'shows RESOURCE_ERROR while S3 is down; afterwards every message exactly once, in order, and no object outside the manifest',
    async () => {
      const s3 = await startTestS3();
      // The writer reaches s3rver through a proxy that shows how far the multipart upload got, and holds back
      // its completion until S3 is down (the parts may all be stored by then).
      const completes = (r: { method: string; url: string }) => r.method === 'POST' && r.url.includes('uploadId=');
      const proxy = await startObservingProxy(s3.settings.endpoint, completes);
      const dir = tempDir('orderly-outage-');
      const env = await openExport(dir.path, { objectStorage: { ...s3.settings, endpoint: proxy.url } });
      try {
        const bucket = await s3.bucket();
        // Not the default "+00:00" names: s3rver ignores the listing's encoding-type=url, so the minio client
        // decodes a "+" in a listed name to a space.
        const cloudStorageConfig = {
          bucket,
          maxBytes: FILE_BYTES,
          filenameDatetimeFormat: 'YYYY-MM-DDThh:mm:ssZ',
          parquetConfig: { writeMetadata: true },
        };
        await env.core.createTopic('events');
        await env.core.createSubscription('to-s3', { topic: 'events', enableMessageOrdering: true, cloudStorageConfig });
        await env.exports.sync();
        const subscription = { name: SUBSCRIPTION, uid: env.core.identity(SUBSCRIPTION).uid };
        const manifest = manifestPath(dir.path, subscription);

        // A bit more than one file: the first file rolls and its upload starts; the rest waits in the next file.
        const first = FILE_BYTES / MESSAGE_BYTES + 8;
        const ids: string[] = [];
        for (let i = 0; i < first; i += 16) ids.push(...(await env.core.publish('events', messages(i, Math.min(16, first - i)))));
        const requests = () => proxy.seen.map((r) => `${r.method} ${r.url} ${r.status ?? '-'}`).join('\n');
        const partDone = (n: number) =>
          proxy.seen.some((r) => r.method === 'PUT' && r.url.includes(`partNumber=${n}&`) && r.status === 200);
        await waitFor('the first part of the multipart upload', () => partDone(1), 60_000).catch((e: Error) => {
          throw new Error(`${e.message}; the proxy saw:\n${requests()}`);
        });
        await s3.stop();
        proxy.release();
        // The outage began while the uploads were under way: parts stored, no upload completed, the objects
        // marked pending in the manifest and not committed. Files roll at a quarter of the runner's 64 MiB
        // budget, so a second file may be sealed, and then uploads in the queue's second lane meanwhile.
        // Counted per object: the SDK retries a CreateMultipartUpload the outage cut off (up to 4 attempts),
        // each one more POST for the same object.
        const started = new Set(
          proxy.seen.filter((r) => r.method === 'POST' && /[?&]uploads(&|=|$)/.test(r.url)).map((r) => r.url.split('?')[0]),
        ).size;
        expect(started, requests()).toBeGreaterThanOrEqual(1);
        expect(started, requests()).toBeLessThanOrEqual(2);
        expect(proxy.seen.some((r) => completes(r) && r.status !== undefined)).toBe(false);
        const atStop = manifestLines(manifest);
        const uploading = [...new Set(atStop.filter((l) => l.type === 'pending').map((l) => l.object))];
        expect(uploading.length).toBeGreaterThanOrEqual(started);
        for (const object of uploading) expect(atStop.filter((l) => l.object === object).map((l) => l.type)).toEqual(['pending']);

        try {
          // Publishing goes on during the outage; the backlog holds it.
          for (let i = first; i < first + 32; i += 16) ids.push(...(await env.core.publish('events', messages(i, 16))));
          await waitFor('RESOURCE_ERROR', () => env.core.getSubscription('to-s3').state === 'RESOURCE_ERROR', 60_000);
          const status = statusOf(env.core, env.exports).find((s) => s.subscription === SUBSCRIPTION)!;
          expect(status).toMatchObject({ state: 'RESOURCE_ERROR', backlog: ids.length });
        } finally {
          await s3.start();
        }

        await waitFor('ACTIVE again', () => env.core.getSubscription('to-s3').state === 'ACTIVE', 60_000);
        await waitFor(
          'everything delivered to the writer',
          () => env.exports.runner('to-s3')!.outstanding === env.core.metrics('to-s3').backlogMessages,
          60_000,
        );
        await env.exports.stop(); // finalizes the open file
        expect(env.core.metrics('to-s3').backlogMessages).toBe(0);

        const committed = new Manifest(manifest);
        const objects = committed.committed().map((o) => o.object);
        committed.close();
        for (const object of uploading) expect(objects).toContain(object); // the interrupted uploads were done again, whole
        expect(await s3.list(bucket)).toEqual([...objects].sort()); // no stray object, none missing

        const position = (data: Buffer) => Number(data.toString('latin1', 0, 32).split(':')[1]);
        const files = await readParquetObjects(s3, bucket, objects, position);
        const report = checkDelivery(ids, files);
        expect(report).toEqual({
          records: ids.length,
          duplicates: { count: 0, examples: [] },
          missing: { count: 0, examples: [] },
          orderViolations: { count: 0, examples: [] },
        });
        expect(checkDelivery([], [restoredBySequence(files)]).orderViolations).toEqual({ count: 0, examples: [] });
        const audit = await auditSubscription(subscription, parseObjectStorageConfig(cloudStorageConfig), {
          dataDir: dir.path,
          objectStorage: s3.settings,
        });
        expect(audit).toMatchObject({
          records: ids.length,
          keys: KEYS,
          missing: { count: 0 },
          duplicates: { count: 0 },
          outOfOrderInFile: { count: 0 },
          objectErrors: { count: 0 },
        });
      } finally {
        await env.close();
        await proxy.close();
        await s3.close();
        dir.remove();
      }
    },
    240_000,
  );
});
