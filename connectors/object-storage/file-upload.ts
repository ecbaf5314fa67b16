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
/** A reused buffer grows in steps of this size. */
const BODY_GRANULE = 1024 * 1024;

/**
 * The local file could not be read as sealed (gone, shorter, an I/O error): not the bucket's fault, and
 * not one that retrying the same file mends. Its deliveries come again and go into a new file.
 */
export class LocalFileError extends Error {
  constructor(message: string, options?: { cause: unknown }) {
    super(message, options);
    this.name = 'LocalFileError';
  }
}

/** What an upload tells as it goes: a part stored (it is moving), a multipart upload started again. */
export interface UploadEvents {
  partStored?(): void;
  restarted?(): void;
}

/** Where a file goes: the bucket, the object key, and the local file with its size. */
export interface FileObject {
  bucket: string;
  key: string;
  path: string;
  size: number;
}

/**
 * Buffers that uploads read files into, reused from one file (or part) to the next: at most one per body
 * uploading at once (the upload queue's two files: 16 MiB at most). A fresh buffer per file or part, held
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
 * parts do not linger in the bucket; an object exists only once completed. One the bucket no longer knows
 * (NoSuchUpload) starts again (putInParts). `events` hears of each part stored and each restart.
 */
export async function uploadFile(s3: S3Client, object: FileObject, buffers: BodyBuffers, events: UploadEvents = {}): Promise<void> {
  const handle = await open(object.path, 'r').catch((e: unknown) => {
    throw new LocalFileError(`${object.path} cannot be opened: ${(e as Error).message}`, { cause: e });
  });
  try {
    if (object.size <= PART_SIZE) await putWhole(s3, object, handle, buffers);
    else await putInParts(s3, object, handle, buffers, events);
  } finally {
    await handle.close();
  }
}

async function putWhole(s3: S3Client, object: FileObject, handle: FileHandle, buffers: BodyBuffers): Promise<void> {
  const { bucket, key, size } = object;
  await buffers.with(size, async (buffer) => {
    const Body = await readRange(handle, object, buffer, 0, size);
    const ChecksumSHA256 = await bodySha256(Body);
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body, ContentLength: size, ChecksumSHA256 }));
  });
}

/** Multipart uploads of one file, in all, while the bucket answers NoSuchUpload (putInParts). */
const MULTIPART_ATTEMPTS = 3;

/**
 * A multipart upload the bucket answers NoSuchUpload is made again, whole, to the same key. S3 and MinIO
 * answer so a CompleteMultipartUpload the SDK retried after the first one's answer was lost, though that
 * one completed the object; and any step of an upload a lifecycle rule or another client aborted. Either
 * way the new upload writes the same bytes again. Failing the object instead put its messages into a new
 * file and left the completed one in the bucket, a duplicate outside the manifest.
 */
async function putInParts(s3: S3Client, object: FileObject, handle: FileHandle, buffers: BodyBuffers, events: UploadEvents): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await putInPartsOnce(s3, object, handle, buffers, events);
    } catch (e) {
      if ((e as { name?: string }).name !== 'NoSuchUpload' || attempt === MULTIPART_ATTEMPTS) throw e;
      events.restarted?.();
    }
  }
}

async function putInPartsOnce(
  s3: S3Client,
  object: FileObject,
  handle: FileHandle,
  buffers: BodyBuffers,
  events: UploadEvents,
): Promise<void> {
  const { bucket, key, size } = object;
  const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key, ChecksumAlgorithm: 'SHA256' }));
  if (!UploadId) throw new Error(`CreateMultipartUpload for ${key} returned no upload id`);
  try {
    const Parts: CompletedPart[] = [];
    // One part at a time: two at once were no faster to s3rver (the upload queue runs two files at once),
    // and held twice the buffers.
    for (let offset = 0; offset < size; offset += PART_SIZE) {
      const length = Math.min(PART_SIZE, size - offset);
      const PartNumber = Parts.length + 1;
      await buffers.with(length, async (buffer) => {
        const Body = await readRange(handle, object, buffer, offset, length);
        const ChecksumSHA256 = await bodySha256(Body);
        const { ETag } = await s3.send(
          new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber, Body, ContentLength: length, ChecksumSHA256 }),
        );
        Parts.push({ PartNumber, ETag, ChecksumSHA256 });
        events.partStored?.();
      });
    }
    await s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId, MultipartUpload: { Parts } }));
  } catch (e) {
    // Best effort: during an outage the abort fails too, and the bucket's lifecycle rule for incomplete
    // uploads (or a later abort) clears the parts; the object itself was never created.
    await s3.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId })).catch(() => undefined);
    throw e;
  }
}

/** Reads `length` bytes at `offset` of the file into the start of `buffer`; a file shorter than sealed is a LocalFileError. */
async function readRange(handle: FileHandle, file: FileObject, buffer: Buffer, offset: number, length: number): Promise<Buffer> {
  for (let done = 0; done < length;) {
    let bytesRead: number;
    try {
      ({ bytesRead } = await handle.read(buffer, done, length - done, offset + done));
    } catch (e) {
      throw new LocalFileError(`${file.path} cannot be read: ${(e as Error).message}`, { cause: e });
    }
    if (!bytesRead) throw new LocalFileError(`${file.path} ends at ${offset + done} bytes, short of the ${file.size} it was sealed with`);
    done += bytesRead;
  }
  return buffer.subarray(0, length);
}
