import { PutObjectCommand } from '@aws-sdk/client-s3';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempDir } from '../../test/helpers/temp-dir.js';
import { startTestS3, type TestS3 } from '../../test/helpers/s3.js';
import { BucketManifest } from './bucket-manifest.js';
import { parseObjectStorageConfig } from './config.js';
import { auditFleetObjects } from './fleet-audit.js';
import type { ManifestObject } from './manifest.js';
import { openRecordFile } from './record-format.js';
import { createS3Client, s3Connection } from './s3-client.js';

let s3: TestS3;
beforeAll(async () => {
  s3 = await startTestS3();
});
afterAll(async () => s3.close());

const SUBSCRIPTION = { name: 'projects/p/subscriptions/fleet', uid: 'uid-1' };

describe('the audit of a fleet export', () => {
  it('checks objects of an earlier format and text objects whose payloads hold newlines by their size, from the manifest', async () => {
    const bucket = await s3.bucket();
    const client = createS3Client(s3Connection(s3.settings));
    const manifest = new BucketManifest(client, bucket, SUBSCRIPTION, 'w1', pino({ level: 'silent' }));
    const commit = async (object: string, format: string, body: Buffer, messages: ManifestObject['messages'] & object) => {
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: object, Body: body }));
      const entry: ManifestObject = {
        object,
        bucket,
        format,
        createdAt: new Date(messages[0]![2]).toISOString(),
        committedAt: new Date().toISOString(),
        records: messages.length,
        bytes: body.length,
        keys: {},
        unkeyed: [],
        messages,
        worker: 'w1',
      };
      await manifest.commit(entry);
    };
    try {
      // Written as Avro before the subscription changed to text.
      const dir = tempDir();
      const avroPath = join(dir.path, 'a.avro');
      const avro = await openRecordFile(avroPath, { kind: 'avro', writeMetadata: true });
      await avro.append(SUBSCRIPTION.name, {
        data: Buffer.from('one'),
        attributes: {},
        messageId: 'm1',
        publishTime: new Date(1000),
        orderingKey: 'k',
        sequence: 0,
      });
      await avro.close();
      await commit('a-0.avro', 'avro', readFileSync(avroPath), [['m1', 'k', 1000]]);
      dir.remove();
      // Two records; the first payload holds a newline, so the object has three lines.
      await commit('b-1.txt', 'text', Buffer.from('two\nlines\nthree\n'), [
        ['m2', 'k', 2000],
        ['m3', 'k', 3000],
      ]);
      const config = parseObjectStorageConfig({ bucket, textConfig: {} });
      expect(await auditFleetObjects(client, SUBSCRIPTION, config)).toMatchObject({
        objects: 2,
        records: 3,
        messages: 3,
        missing: { count: 0 },
        duplicates: { count: 0 },
        outOfOrderInFile: { count: 0 },
        skewedKeys: { count: 0 },
        objectErrors: { count: 0 },
      });

      // An object cut short is an error, named with both sizes.
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: 'b-1.txt', Body: Buffer.from('two\nlines\n') }));
      expect((await auditFleetObjects(client, SUBSCRIPTION, config)).objectErrors).toEqual({
        count: 1,
        examples: ['b-1.txt: 10 bytes, manifest says 16'],
      });
    } finally {
      client.destroy();
    }
  });
});
