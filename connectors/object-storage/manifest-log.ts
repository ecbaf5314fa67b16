import { DeleteObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import type { Logger } from '../../src/log.js';
import { Manifest, type ManifestObject } from './manifest.js';
import { classifyS3Error, type S3Failure } from './s3-client.js';

/**
 * Where an object-storage writer records its objects, in the order of an upload: `markPending` before it
 * starts, `commit` once the object is complete (and before any of its messages is acked), `discard` when
 * it failed. Two kinds: one machine's manifest file (an export of the embedded core), and the bucket
 * itself (a remote subscription's fleet, whose workers all see every object: see BucketManifest).
 */
export interface ManifestLog {
  /** Objects committed before this writer opened that a redelivery may bring again; asked once, at open (not kept after). */
  committedAtOpen(): ManifestObject[];
  /** The highest file counter an object was named with (0 if none). */
  lastCounter(): number;
  /**
   * Settles uploads a crash left unfinished (started, never committed or discarded), so no object stands
   * in the bucket outside the manifest. Throws an S3Failure-carrying SinkFailure when the bucket cannot be reached.
   */
  recover(): Promise<void>;
  markPending(entry: ManifestObject): Promise<void>;
  commit(entry: ManifestObject): Promise<void>;
  discard(object: string): Promise<void>;
  close(): void;
}

/** A bucket call failed as a whole: the writer turns it into the subscription's state. */
export class BucketFailure extends Error {
  constructor(readonly failure: S3Failure) {
    super(failure.message);
    this.name = 'BucketFailure';
  }
}

/**
 * The manifest as a file under the job's data directory (see Manifest): an upload a crash left unfinished
 * is deleted from the bucket, as its messages were never acked and come again.
 */
export class LocalManifestLog implements ManifestLog {
  private readonly manifest: Manifest;

  constructor(
    path: string,
    private readonly s3: S3Client,
    private readonly bucket: string,
    private readonly logger: Logger,
  ) {
    this.manifest = new Manifest(path);
    if (this.manifest.repairedBytes)
      logger.warn({ manifest: path, bytes: this.manifest.repairedBytes }, 'cut a torn last line (a crash mid-append) off the manifest');
  }

  committedAtOpen(): ManifestObject[] {
    return this.manifest.takeCommitted();
  }

  lastCounter(): number {
    return this.manifest.lastCounter();
  }

  async recover(): Promise<void> {
    // Uploaded (or half-uploaded) but never committed: its messages were not acked and will be written
    // again, so the object goes rather than stand as a duplicate outside the manifest. It is in the bucket
    // it was uploaded to, whatever the job file names now.
    for (const { object, bucket = this.bucket } of this.manifest.unfinished()) {
      try {
        await this.s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: object }));
      } catch (e) {
        throw new BucketFailure(classifyS3Error(e, bucket));
      }
      await this.manifest.discard(object);
      this.logger.info({ bucket, object }, 'removed an object uploaded before a crash but never committed');
    }
  }

  async markPending(entry: ManifestObject): Promise<void> {
    await this.manifest.markPending(entry.object, entry.counter, entry.bucket);
  }

  async commit(entry: ManifestObject): Promise<void> {
    await this.manifest.commit(entry);
  }

  async discard(object: string): Promise<void> {
    await this.manifest.discard(object);
  }

  close(): void {
    this.manifest.close();
  }
}
