import type { S3Client } from '@aws-sdk/client-s3';
import { stat } from 'node:fs/promises';
import { SinkStateError, emptyResult, type WriteResult } from '../../src/connector/connector.js';
import type { ManifestObject } from './manifest.js';
import { BucketFailure, type ManifestLog } from './manifest-log.js';
import type { RollingFile } from './rolling-file.js';
import { BodyBuffers, LocalFileError, uploadFile } from './file-upload.js';
import { classifyS3Error, type S3Failure } from './s3-client.js';

/** Files uploading at once: one upload's round trips overlap the other's transfer. */
const PARALLEL_UPLOADS = 2;

export interface UploadQueueOptions {
  s3: S3Client;
  bucket: string;
  /** The format's name, for the manifest. */
  format: string;
  manifest: ManifestLog;
  /** Recorded in each manifest entry (a fleet's worker). */
  worker?: string;
  /** Totals the writer reports as its counters. */
  counters: { objectsWritten: number; bytesUploaded: number; uploadRetries: number };
  /** An object was committed: its messages count as written from now on. */
  committed(entry: ManifestObject): void;
  /** Deliveries became written or failed in the background. */
  notify(): void;
}

/**
 * Sealed files waiting for upload, oldest first (each closes in the background: its lane waits for that),
 * uploaded in the background two at a time (multipart when large; the next file starts as soon as one
 * finishes). Per file: manifest "pending", upload,
 * manifest "committed", then its deliveries are written. A sink-wide failure blocks the queue (the file
 * stays in line, retried from the next `settle`); a failure of this object alone (a 4xx the sink will
 * always give) fails its deliveries. What finished is collected with `take`.
 */
export class UploadQueue {
  private readonly sealed: RollingFile[] = [];
  /** Resolves once no upload lane runs; set while one does. */
  private uploading?: Promise<void>;
  private lanesStopped?: () => void;
  /** Upload lanes running (at most PARALLEL_UPLOADS). */
  private lanes = 0;
  /** Set when the sink as a whole failed an upload; uploads wait for the next settle to retry. */
  private blocked?: S3Failure;
  /** An unexpected error of the upload loop, thrown from the next call. */
  private fault?: Error;
  /** What finished in the background since the last take. */
  private finished = emptyResult();
  /** Files being uploaded now (the first ones of `sealed`, not necessarily in order), with when each last moved (began, or stored a part). */
  private readonly inFlight = new Map<RollingFile, number>();
  /** Buffers the lanes read files into, reused from one upload to the next. */
  private readonly bodies = new BodyBuffers();
  /** Called when an upload ends or the loop stops (see waitBelow). */
  private waiters: (() => void)[] = [];

  constructor(private readonly options: UploadQueueOptions) {}

  /** The upload longest without progress, if any: a hung one must show (Connector.busy). */
  oldestUpload(): { name: string; since: number } | undefined {
    let oldest: { name: string; since: number } | undefined;
    for (const [file, since] of this.inFlight) if (!oldest || since < oldest.since) oldest = { name: `upload of ${file.object}`, since };
    return oldest;
  }

  add(file: RollingFile): void {
    this.sealed.push(file);
  }

  /** Uploads in the background, unless the sink is blocked (then the next settle retries it). */
  kick(): void {
    if (!this.blocked) void this.start();
  }

  /**
   * Retries a blocked sink in the foreground (so the runner sees its state and backs off), and waits for
   * every upload when `all`. Throws the sink's state, or an unexpected failure of the loop.
   */
  async settle(all: boolean): Promise<void> {
    this.raiseFault();
    const retry = this.blocked !== undefined;
    this.blocked = undefined;
    const uploads = this.start();
    if (all || retry) await uploads;
    this.raiseFault();
    if (this.blocked) throw stateError(this.blocked);
  }

  /**
   * Waits while the files in line hold at least `messages` deliveries or `bytes`, as long as uploads run
   * (not blocked, no fault), for at most `maxWaitMs`: the writer's backpressure, so new files fill while
   * earlier ones upload instead of the runner's budget filling up and everything waiting for a
   * `flush('all')`. Bounded, so a slow upload never holds the runner longer than its flush interval.
   */
  async waitBelow(messages: number, bytes: number, maxWaitMs: number): Promise<void> {
    const until = Date.now() + maxWaitMs;
    for (;;) {
      let queuedMessages = 0;
      let queuedBytes = 0;
      for (const f of this.sealed) {
        queuedMessages += f.records;
        queuedBytes += f.bytes;
      }
      const left = until - Date.now();
      if ((queuedMessages < messages && queuedBytes < bytes) || !this.uploading || left <= 0) return;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  take(): WriteResult {
    const result = this.finished;
    this.finished = emptyResult();
    return result;
  }

  raiseFault(): void {
    if (this.fault === undefined) return;
    const fault = this.fault;
    this.fault = undefined;
    throw fault;
  }

  /** Waits for the upload in progress, then hands back the files never uploaded. */
  async stop(): Promise<RollingFile[]> {
    await this.uploading;
    return this.sealed.splice(0);
  }

  /**
   * Starts a lane for each file no lane has, up to PARALLEL_UPLOADS running: a lane stops once it finds
   * nothing left, so a file sealed after that gets its own lane rather than waiting for the other lane's
   * upload to end. Resolves when every lane has stopped (nothing left, or blocked).
   */
  private start(): Promise<void> {
    while (this.lanes < PARALLEL_UPLOADS && this.sealed.length > this.inFlight.size && !this.blocked && !this.fault) {
      if (this.lanes++ === 0) this.uploading = new Promise<void>((resolve) => (this.lanesStopped = resolve));
      // A lane takes its file synchronously (inFlight), so the next turn of this loop sees one file fewer.
      void this.uploadLane().finally(() => this.laneStopped());
    }
    return this.uploading ?? Promise.resolve();
  }

  private laneStopped(): void {
    if (--this.lanes > 0) return;
    this.uploading = undefined;
    this.lanesStopped!();
    this.wakeWaiters();
    const { written, failed } = this.finished;
    if (written.length || failed.length) this.options.notify();
  }

  private wakeWaiters(): void {
    for (const wake of this.waiters.splice(0)) wake();
  }

  /** Uploads the oldest file no other lane has, one after another, until none is left, the sink is blocked, or a lane failed. */
  private async uploadLane(): Promise<void> {
    while (!this.blocked && !this.fault) {
      const file = this.sealed.find((f) => !this.inFlight.has(f));
      if (!file) return;
      this.inFlight.set(file, Date.now());
      try {
        await this.upload(file);
      } catch (e) {
        this.fault = e instanceof Error ? e : new Error(String(e));
      } finally {
        this.inFlight.delete(file);
        this.wakeWaiters();
      }
    }
  }

  private async upload(file: RollingFile): Promise<void> {
    const { s3, bucket, format, manifest, worker, counters } = this.options;
    // Sealed files close in the background; a close that failed is the lane's fault (the connector's next call throws it).
    await file.close();
    const size = (await stat(file.localPath)).size;
    const entry = file.manifestEntry(bucket, format, size, worker);
    let failure: S3Failure | undefined;
    try {
      await manifest.markPending(entry);
      await uploadFile(s3, { bucket, key: file.object, path: file.localPath, size }, this.bodies, {
        // A multi-GB file uploads for minutes: it is stalled only when no part has been stored for that long.
        partStored: () => this.inFlight.set(file, Date.now()),
        restarted: () => {
          counters.uploadRetries++;
          this.inFlight.set(file, Date.now());
        },
      });
      const committed = { ...entry, committedAt: new Date().toISOString() };
      await manifest.commit(committed);
      this.options.committed(committed);
      counters.objectsWritten++;
      counters.bytesUploaded += size;
    } catch (e) {
      // A local file that cannot be read fails this object alone: its deliveries come again, into a new file.
      failure = e instanceof BucketFailure ? e.failure : e instanceof LocalFileError ? { message: e.message } : classifyS3Error(e, bucket);
      counters.uploadRetries++;
      if (failure.state) {
        this.blocked = failure;
        return;
      }
      await manifest.discard(file.object);
    }
    this.sealed.splice(this.sealed.indexOf(file), 1);
    await file.remove();
    // Into whatever result the next call takes (not one captured before the awaits above).
    if (failure) this.finished.failed.push(...file.deliveries.map((em) => ({ id: em.id, error: failure.message, retryable: true })));
    else this.finished.written.push(...file.deliveries.map((em) => em.id));
  }
}

export function stateError(f: S3Failure): SinkStateError {
  return new SinkStateError(f.state ?? 'RESOURCE_ERROR', f.message);
}
