import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseObjectStorageConfig } from '../../connectors/object-storage/config.js';
import { Manifest } from '../../connectors/object-storage/manifest.js';
import { manifestPath, ObjectStorageWriter } from '../../connectors/object-storage/object-writer.js';
import { tempDir } from '../helpers/temp-dir.js';
import { startTestS3, type TestS3 } from '../helpers/s3.js';
import { keyedExportMessage, writerContext } from '../helpers/writer-context.js';

/**
 * Issue #9.2 ("never ack a message that was not written"): the object writer took every sequence at or
 * below a key's highest committed one for written. Two files of a key upload at once; the later one
 * commits, the earlier one is refused (a 4xx for that object alone) and its messages come again — below
 * the high-water mark, so they were acked and written nowhere.
 */
let s3: TestS3;
beforeAll(async () => {
  s3 = await startTestS3();
});
afterAll(async () => s3.close());

describe('the object writer reports written only what a committed object holds', () => {
  it('messages below a later committed file of their key are written again, those inside it are not', async () => {
    const dir = tempDir();
    const bucket = await s3.bucket();
    const subscription = { name: 'projects/p/subscriptions/gap', uid: 'gap-uid' };
    // File B (K 6-10) committed; file A (K 1-5, named before it) was refused and discarded.
    const manifest = new Manifest(manifestPath(dir.path, subscription));
    await manifest.markPending('A', 1);
    await manifest.markPending('B', 2);
    await manifest.commit({
      object: 'B',
      bucket,
      format: 'text',
      createdAt: new Date().toISOString(),
      counter: 2,
      committedAt: new Date().toISOString(),
      records: 5,
      bytes: 10,
      keys: { K: { first: 6, last: 10, count: 5 } },
      unkeyed: [],
    });
    await manifest.discard('A');
    manifest.close();

    const writer = new ObjectStorageWriter(
      parseObjectStorageConfig({ bucket, filenameDatetimeFormat: 'YYYY-MM-DDThh:mm:ssZ', textConfig: {} }),
      writerContext('gap', { dataDir: dir.path, objectStorage: s3.settings }),
    );
    await writer.open();
    // The redelivery rule brings K 1-10 again (and K 11 is new).
    const batch = Array.from({ length: 11 }, (_, i) => keyedExportMessage('K', i + 1, 2));
    const first = await writer.write(batch);
    expect(first.written.sort()).toEqual(['K-10', 'K-6', 'K-7', 'K-8', 'K-9']);
    expect((await writer.flush('all')).written).toEqual(['K-1', 'K-2', 'K-3', 'K-4', 'K-5', 'K-11']);
    await writer.close();
    const objects = await s3.list(bucket);
    expect(objects).toHaveLength(1);
    expect((await s3.get(bucket, objects[0]!)).toString().trim().split('\n')).toEqual(['K1', 'K2', 'K3', 'K4', 'K5', 'K11']);
    dir.remove();
  });
});
