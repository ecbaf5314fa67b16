import { createHash, randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startObservingProxy, type Interception, type SeenRequest } from '../../test/faults/observing-proxy.js';
import { tempDir } from '../../test/helpers/temp-dir.js';
import { startTestS3, type TestS3 } from '../../test/helpers/s3.js';
import { BodyBuffers, LocalFileError, PART_SIZE, uploadFile } from './file-upload.js';
import { createS3Client, s3Connection } from './s3-client.js';

let s3: TestS3;
beforeAll(async () => {
  s3 = await startTestS3();
});
afterAll(() => s3.close());

interface Upload {
  bucket: string;
  path: string;
  content: Buffer;
  client: ReturnType<typeof createS3Client>;
  /** Every request the client made, with its headers, through a proxy in front of S3. */
  seen: SeenRequest[];
}

/** A fresh bucket, a local file of `bytes` random bytes, and a client that reaches S3 through a recording proxy. */
async function withFile(
  bytes: number,
  run: (u: Upload) => Promise<void>,
  intercept?: (r: SeenRequest) => Interception | undefined,
): Promise<void> {
  const bucket = await s3.bucket();
  const dir = tempDir('orderly-upload-');
  const proxy = await startObservingProxy(s3.settings.endpoint, undefined, intercept);
  const client = createS3Client(s3Connection({ ...s3.settings, endpoint: proxy.url }));
  try {
    const content = randomBytes(bytes);
    const path = join(dir.path, 'file.bin');
    writeFileSync(path, content);
    await run({ bucket, path, content, client, seen: proxy.seen });
  } finally {
    client.destroy();
    await proxy.close();
    dir.remove();
  }
}

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest();

it('a file over a part goes up in parts, each carrying and signed with its own SHA-256; the object is the file, byte for byte', () =>
  withFile(2 * PART_SIZE + 12345, async ({ bucket, path, content, client, seen }) => {
    await uploadFile(client, { bucket, key: 'big.bin', path, size: content.length }, new BodyBuffers());
    const parts = seen.filter((r) => r.method === 'PUT' && r.url.includes('partNumber='));
    expect(parts.map((r) => Number(/partNumber=(\d+)/.exec(r.url)![1]))).toEqual([1, 2, 3]);
    for (const [i, part] of parts.entries()) {
      const hash = sha256(content.subarray(i * PART_SIZE, (i + 1) * PART_SIZE));
      expect(part.headers['x-amz-checksum-sha256']).toBe(hash.toString('base64'));
      expect(part.headers['x-amz-content-sha256']).toBe(hash.toString('hex'));
      expect(part.status).toBe(200);
    }
    expect(seen.filter((r) => r.method === 'POST' && r.url.includes('uploadId=')).map((r) => r.status)).toEqual([200]);
    expect(seen.some((r) => r.method === 'DELETE')).toBe(false);
    expect((await s3.get(bucket, 'big.bin')).equals(content)).toBe(true);
  }));

it('a file up to a part goes up whole, in one PutObject signed with its SHA-256', () =>
  withFile(PART_SIZE, async ({ bucket, path, content, client, seen }) => {
    await uploadFile(client, { bucket, key: 'whole.bin', path, size: content.length }, new BodyBuffers());
    expect(seen.map((r) => `${r.method} ${r.status}`)).toEqual(['PUT 200']);
    expect(seen[0]!.headers['x-amz-content-sha256']).toBe(sha256(content).toString('hex'));
    expect((await s3.get(bucket, 'whole.bin')).equals(content)).toBe(true);
  }));

it('a multipart upload that fails (the local file ends early) is aborted and leaves no object', () =>
  withFile(PART_SIZE + 100, async ({ bucket, path, client, seen }) => {
    // Its size as sealed was three parts; the file on disk holds less than two.
    const upload = uploadFile(client, { bucket, key: 'torn.bin', path, size: 3 * PART_SIZE }, new BodyBuffers());
    // Not the bucket's fault (which would block the sink): the upload queue fails this object alone.
    await expect(upload).rejects.toThrow(
      new LocalFileError(`${path} ends at ${PART_SIZE + 100} bytes, short of the ${3 * PART_SIZE} it was sealed with`),
    );
    await expect(upload).rejects.toBeInstanceOf(LocalFileError);
    // AbortMultipartUpload, once (MinIO and S3 answer 204; s3rver, which has no such call, 405).
    expect(seen.filter((r) => r.method === 'DELETE' && r.url.includes('uploadId='))).toHaveLength(1);
    expect(seen.some((r) => r.method === 'POST' && r.url.includes('uploadId='))).toBe(false);
    expect(await s3.list(bucket)).toEqual([]);
  }));

/** A CompleteMultipartUpload request: POST to the object with its upload id. */
const isComplete = (r: SeenRequest) => r.method === 'POST' && r.url.includes('uploadId=');

/**
 * The first CompleteMultipartUpload completes the object but its answer is lost; the SDK retries it, and
 * the bucket answers the retry NoSuchUpload, as S3 and MinIO do once an upload is completed (s3rver
 * answers 500, so the proxy answers for it).
 */
const noSuchUpload = (uploadId: string): Interception => ({
  status: 404,
  body: `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchUpload</Code><Message>The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.</Message><UploadId>${uploadId}</UploadId></Error>`,
});
const uploadIdOf = (r: SeenRequest) => new URL(r.url, 'http://s3').searchParams.get('uploadId')!;

function loseFirstCompleteAnswer(): (r: SeenRequest) => Interception | undefined {
  const completed = new Set<string>();
  return (r) => {
    if (!isComplete(r)) return undefined;
    const uploadId = uploadIdOf(r);
    if (completed.size === 0) {
      completed.add(uploadId);
      return 'lose';
    }
    return completed.has(uploadId) ? noSuchUpload(uploadId) : undefined;
  };
}

it('a multipart upload whose completion answer was lost, and whose retried completion is answered NoSuchUpload, is uploaded again to the same key: the object is the file, and no error', () =>
  withFile(
    PART_SIZE + 4321,
    async ({ bucket, path, content, client, seen }) => {
      // Failing here failed the object: its messages went into a new file while this one stayed in the bucket.
      let restarts = 0;
      let parts = 0;
      await uploadFile(client, { bucket, key: 'retried.bin', path, size: content.length }, new BodyBuffers(), {
        restarted: () => restarts++,
        partStored: () => parts++,
      });
      expect(parts).toBe(4); // two parts, twice
      expect(restarts).toBe(1);
      expect(seen.filter((r) => r.method === 'POST' && r.url.includes('uploads'))).toHaveLength(2);
      expect(seen.filter(isComplete).map((r) => r.status)).toEqual([200, 404, 200]);
      expect(await s3.list(bucket)).toEqual(['retried.bin']);
      expect((await s3.get(bucket, 'retried.bin')).equals(content)).toBe(true);
    },
    loseFirstCompleteAnswer(),
  ));

it('a multipart upload the bucket keeps answering NoSuchUpload is tried three times in all, then fails, leaving no object', () =>
  withFile(
    PART_SIZE + 10,
    async ({ bucket, path, content, client, seen }) => {
      let restarts = 0;
      const upload = uploadFile(client, { bucket, key: 'gone.bin', path, size: content.length }, new BodyBuffers(), {
        restarted: () => restarts++,
      });
      await expect(upload).rejects.toMatchObject({ name: 'NoSuchUpload' });
      expect(restarts).toBe(2);
      expect(seen.filter((r) => r.method === 'POST' && r.url.includes('uploads'))).toHaveLength(3);
      expect(seen.filter(isComplete).map((r) => r.status)).toEqual([404, 404, 404]);
      expect(await s3.list(bucket)).toEqual([]);
    },
    (r) => (isComplete(r) ? noSuchUpload(uploadIdOf(r)) : undefined),
  ));
