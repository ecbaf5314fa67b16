import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  PutObjectCommand,
  UploadPartCommand,
  type CompletedPart,
  type S3Client,
} from '@aws-sdk/client-s3';
import { open, type FileHandle } from 'node:fs/promises';
import { bodySha256 } from './s3-client.js';

/** Multipart above this size, in parts of this size: memory stays bounded whatever the file size. */
export const PART_SIZE = 8 * 1024 * 1024;
/** Parts of one file uploading at once: one part's round trip overlaps the other's transfer. */
const PARTS_IN_FLIGHT = 2;
/** A reused buffer grows in steps of this size. */
const BODY_GRANULE = 1024 * 1024;

/** Where a file goes: the bucket, the object key, and the local file with its size. */
export interface FileObject {
  bucket: string;
  key: string;
  path: string;
  size: number;
}

/**
 * Buffers that uploads read files into, reused from one file (or part) to the next: at most one per body
 * uploading at once (two files, two parts each: 32 MiB at most). A fresh buffer per file or part, held
 * across its request, was promoted by V8 and stayed in memory as garbage until the next full collection.
 */
export class BodyBuffers {
  private readonly free: Buffer[] = [];

  async with<T>(size: number, use: (body: Buffer) => Promise<T>): Promise<T> {
    const fits = this.free.findIndex((b) => b.length >= size);
    let body: Buffer;
    if (fits >= 0) body = this.free.splice(fits, 1)[0]!;
    else {
      // One too small is dropped for it: there are never more buffers than bodies uploading at once.
      this.free.pop();
      body = Buffer.allocUnsafeSlow(Math.ceil(size / BODY_GRANULE) * BODY_GRANULE || BODY_GRANULE);
    }
    try {
      return await use(body);
    } finally {
      this.free.push(body);
    }
  }
}

/**
 * Uploads the file whole (PutObject) up to PART_SIZE, in PART_SIZE parts above it. Every request body is read
 * from the file into a reused buffer by libuv, hashed (SHA-256) by WebCrypto on libuv's thread pool, and
 * carries that hash, which also signs it (s3-client.ts): the event loop never copies, hashes or checksums a
 * body. (The SDK's own multipart `Upload` did all three on the loop: blocks of up to 50 ms, a p99 loop
 * delay of ~20 ms for as long as a 64 MiB file uploaded.) A multipart upload that fails is aborted, so its
 * parts do not linger in the bucket; an object exists only once completed.
 */
export async function uploadFile(s3: S3Client, object: FileObject, buffers: BodyBuffers): Promise<void> {
  const handle = await open(object.path, 'r');
  try {
    if (object.size <= PART_SIZE) await putWhole(s3, object, handle, buffers);
    else await putInParts(s3, object, handle, buffers);
  } finally {
    await handle.close();
  }
}

async function putWhole(s3: S3Client, object: FileObject, handle: FileHandle, buffers: BodyBuffers): Promise<void> {
  const { bucket, key, path, size } = object;
  await buffers.with(size, async (buffer) => {
    const Body = await readRange(handle, path, buffer, 0, size);
    const ChecksumSHA256 = await bodySha256(Body);
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body, ContentLength: size, ChecksumSHA256 }));
  });
}

async function putInParts(s3: S3Client, object: FileObject, handle: FileHandle, buffers: BodyBuffers): Promise<void> {
  const { bucket, key, path, size } = object;
  const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key, ChecksumAlgorithm: 'SHA256' }));
  if (!UploadId) throw new Error(`CreateMultipartUpload for ${key} returned no upload id`);
  const count = Math.ceil(size / PART_SIZE);
  const parts: CompletedPart[] = new Array<CompletedPart>(count);
  let next = 0;
  let failed = false;
  const lane = async () => {
    while (next < count && !failed) {
      const index = next++;
      const offset = index * PART_SIZE;
      const length = Math.min(PART_SIZE, size - offset);
      await buffers.with(length, async (buffer) => {
        const Body = await readRange(handle, path, buffer, offset, length);
        const ChecksumSHA256 = await bodySha256(Body);
        const PartNumber = index + 1;
        const { ETag } = await s3.send(
          new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber, Body, ContentLength: length, ChecksumSHA256 }),
        );
        parts[index] = { PartNumber, ETag, ChecksumSHA256 };
      });
    }
  };
  try {
    // Every lane's failure is awaited before the abort, so no part is still being sent when it runs.
    const lanes = Array.from({ length: Math.min(PARTS_IN_FLIGHT, count) }, () =>
      lane().catch((e: unknown) => {
        failed = true;
        throw e;
      }),
    );
    const outcomes = await Promise.allSettled(lanes);
    const rejected = outcomes.find((o): o is PromiseRejectedResult => o.status === 'rejected');
    if (rejected) throw rejected.reason;
    await s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId, MultipartUpload: { Parts: parts } }));
  } catch (e) {
    // Best effort: during an outage the abort fails too, and the bucket's lifecycle rule for incomplete
    // uploads (or a later abort) clears the parts; the object itself was never created.
    await s3.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId })).catch(() => undefined);
    throw e;
  }
}

/** Reads `length` bytes at `offset` of the file into the start of `buffer`; a file shorter than that is an error. */
async function readRange(handle: FileHandle, path: string, buffer: Buffer, offset: number, length: number): Promise<Buffer> {
  for (let done = 0; done < length;) {
    const { bytesRead } = await handle.read(buffer, done, length - done, offset + done);
    if (!bytesRead) throw new Error(`${path} ended at ${offset + done} of its ${offset + length} bytes`);
    done += bytesRead;
  }
  return buffer.subarray(0, length);
}
