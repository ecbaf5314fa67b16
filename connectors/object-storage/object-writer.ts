import { DeleteObjectCommand, HeadBucketCommand, type S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { createReadStream, existsSync, mkdirSync, rmdirSync, rmSync } from 'node:fs';
import { mkdir, rm, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { SinkStateError, emptyCounters, emptyResult, type Connector, type ConnectorContext, type ExportMessage, type WriteResult } from '../../src/connector/connector.js';
import { subscriptionDir } from '../../src/connector/sink-paths.js';
import { durableRename } from '../../src/store/durable-file.js';
import { CommittedRanges } from '../../src/connector/committed-ranges.js';
import type { ObjectStorageConfig } from './config.js';
import { Manifest, type ManifestObject } from './manifest.js';
import { newWriterTag, objectNamer, uniqueId, type ObjectNamer } from './object-naming.js';
import { RollingFile } from './rolling-file.js';
import { classifyS3Error, createS3Client, s3Connection, type S3Failure } from './s3-client.js';

/** Multipart above this size, in parts of this size: memory stays bounded whatever the file size. */
const PART_SIZE = 8 * 1024 * 1024;
/** Files uploading at once: one upload's round trips overlap the other's transfer. */
const PARALLEL_UPLOADS = 2;
/** Open files roll at this share of the runner's budget, so several files are in the pipeline. */
const ROLL_AT_BUDGET_SHARE = 1 / 4;

/**
 * The object-storage writer (Cloud Storage-subscription style). Each shard fills one rolling file at a
 * time; a key always maps to the same shard (stable hash), so its records stay in publish order inside
 * and across that shard's files. A file rolls on maxMessages or maxBytes (during `write`), maxDuration
 * (`flush('due')`), or when the open files hold a quarter of the runner's budget (so the next files fill
 * while these upload). Rolled files are uploaded in the background, two at a time (multipart when large),
 * committed to the manifest, and only then reported written (from the next call, after `notify`), so a
 * message is acked only once the object holding it is complete. A redelivery of what a committed object
 * already holds (a crash between commit and ack) is acked without being written again, so the manifest
 * view holds every message once. The manifest and spill files live under the subscription's uid, so a
 * subscription created again under the same name starts with an empty manifest.
 */
export class ObjectStorageWriter implements Connector {
  private s3?: S3Client;
  private manifest?: Manifest;
  private readonly namer: ObjectNamer;
  private readonly shards: (RollingFile | undefined)[];
  /** Closed files waiting for upload, oldest first. */
  private readonly sealed: RollingFile[] = [];
  /** The background upload loop, while it runs. */
  private uploading?: Promise<void>;
  /** Set when the sink as a whole failed an upload; uploads wait for the next flush to retry. */
  private blocked?: S3Failure;
  /** An unexpected error of the upload loop, thrown from the next call. */
  private fault?: unknown;
  /** What finished in the background since the last call. */
  private finished = emptyResult();
  /** Deliveries and payload bytes in the open files. */
  private openMessages = 0;
  private openBytes = 0;
  private readonly spillDir: string;
  readonly manifestPath: string;
  /** Names the spill files of this writer. */
  private spillCounter = 0;
  /** The next object name's counter: above every name the manifest has seen (see uniqueId). */
  private nameCounter = 1;
  private readonly writerTag = newWriterTag();
  readonly counters = emptyCounters();
  private readonly committedRanges = new CommittedRanges();
  /** Unkeyed message id -> when its object committed. */
  private readonly committedIds = new Map<string, number>();
  private idsPrunedAt = 0;

  constructor(
    private readonly config: ObjectStorageConfig,
    private readonly context: ConnectorContext,
    private readonly now: () => Date = () => new Date(),
  ) {
    this.namer = objectNamer(config.filenamePrefix, config.filenameSuffix, config.filenameDatetimeFormat);
    this.shards = new Array(config.shards).fill(undefined);
    const subscription = { name: context.subscription, uid: context.identity.uid };
    this.spillDir = join(exportDir(context.settings.dataDir, subscription), 'spill');
    this.manifestPath = manifestPath(context.settings.dataDir, subscription);
  }

  async open(): Promise<void> {
    this.s3 ??= createS3Client(s3Connection(this.context.settings.objectStorage as Record<string, unknown> | undefined));
    try {
      await this.s3.send(new HeadBucketCommand({ Bucket: this.config.bucket }));
    } catch (e) {
      throw this.stateError(classifyS3Error(e, this.config.bucket));
    }
    if (!this.manifest) {
      // Spill files of a previous run hold messages that were never acked: they come again.
      await rm(this.spillDir, { recursive: true, force: true });
      await mkdir(this.spillDir, { recursive: true });
      if (this.context.identity.adoptsNameKeyedProgress) this.adoptNameKeyedManifest();
      const manifest = new Manifest(this.manifestPath);
      if (manifest.repairedBytes) {
        this.context.logger.warn({ manifest: this.manifestPath, bytes: manifest.repairedBytes }, 'cut a torn last line (a crash mid-append) off the manifest');
      }
      for (const entry of manifest.committed()) this.remember(entry);
      this.nameCounter = manifest.lastCounter() + 1;
      this.manifest = manifest;
    }
    // Uploaded (or half-uploaded) but never committed: its messages were not acked and will be written
    // again, so the object goes rather than stand as a duplicate outside the manifest.
    for (const object of this.manifest.unfinished()) {
      try {
        await this.s3.send(new DeleteObjectCommand({ Bucket: this.config.bucket, Key: object }));
      } catch (e) {
        throw this.stateError(classifyS3Error(e, this.config.bucket));
      }
      this.manifest.discard(object);
      this.context.logger.info({ object }, 'removed an object uploaded before a crash but never committed');
    }
  }

  /**
   * A subscription older than uids kept its manifest in a folder named after it (with every character
   * outside [A-Za-z0-9._-] folded to `_`): it moves under the uid, once, unless this one already has one.
   */
  private adoptNameKeyedManifest(): void {
    const legacyDir = join(this.context.settings.dataDir, 'object-storage', this.context.subscription.replace(/[^A-Za-z0-9._-]+/g, '_'));
    const legacy = join(legacyDir, 'manifest.jsonl');
    if (existsSync(this.manifestPath) || !existsSync(legacy)) return;
    mkdirSync(dirname(this.manifestPath), { recursive: true });
    durableRename(legacy, this.manifestPath);
    this.context.logger.info({ from: legacy, to: this.manifestPath }, 'adopted the manifest this subscription kept before it had a uid');
    rmSync(join(legacyDir, 'spill'), { recursive: true, force: true });
    try {
      rmdirSync(legacyDir);
    } catch {
      // not empty (another subscription's files, or the user's): left as it is
    }
  }

  private stateError(f: S3Failure): SinkStateError {
    return new SinkStateError(f.state ?? 'RESOURCE_ERROR', f.message);
  }

  private shardOf(em: ExportMessage): number {
    const key = em.message.orderingKey || em.message.messageId;
    let h = 2166136261;
    for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 16777619);
    return (h >>> 0) % this.shards.length;
  }

  private commit(entry: ManifestObject): void {
    this.manifest!.commit(entry);
    this.remember(entry);
  }

  /** Committed objects' per-key ranges and unkeyed ids: what a redelivery may bring again. */
  private remember(entry: ManifestObject): void {
    for (const [key, range] of Object.entries(entry.keys)) this.committedRanges.add(key, range.first, range.last);
    const committedAt = Date.parse(entry.committedAt);
    if (committedAt < this.expiredBefore()) return;
    for (const id of entry.unkeyed) this.committedIds.set(id, committedAt);
  }

  /**
   * Messages of objects committed before this were published before it too: past the subscription's
   * messageRetentionDuration, so never delivered again, and their ids need not be remembered.
   */
  private expiredBefore(): number {
    return this.now().getTime() - this.context.spec.messageRetentionDuration * 1000;
  }

  /** At most once a minute, forgets the ids no redelivery can bring again. */
  private forgetExpiredIds(): void {
    const now = this.now().getTime();
    if (now - this.idsPrunedAt < 60_000) return;
    this.idsPrunedAt = now;
    const before = this.expiredBefore();
    for (const [id, committedAt] of this.committedIds) if (committedAt < before) this.committedIds.delete(id);
  }

  private alreadyCommitted(em: ExportMessage): boolean {
    const { orderingKey, sequence, messageId } = em.message;
    if (orderingKey === '') return this.committedIds.has(messageId);
    // Per-key ranges only say "already written" when the key arrives in order (ordered subscriptions): a
    // file then holds every message of the key between its first and last.
    return this.context.spec.enableMessageOrdering && this.committedRanges.has(orderingKey, sequence);
  }

  async write(batch: ExportMessage[]): Promise<WriteResult> {
    this.raiseFault();
    this.forgetExpiredIds();
    const duplicates: string[] = [];
    for (const em of batch) {
      if (this.alreadyCommitted(em)) {
        duplicates.push(em.id);
        continue;
      }
      const s = this.shardOf(em);
      let file = this.shards[s];
      if (!file) {
        const openedAt = this.now();
        const counter = this.nameCounter++;
        const object = this.namer.name(openedAt, uniqueId(counter, this.writerTag));
        file = await RollingFile.open(object, counter, join(this.spillDir, `${++this.spillCounter}.part`), openedAt, this.config);
        this.shards[s] = file;
      }
      const bytes = file.bytes;
      await file.append(this.context.subscription, em);
      this.openMessages++;
      this.openBytes += file.bytes - bytes;
      if (file.full(this.config)) await this.seal(s);
    }
    const { budget } = this.context;
    if (this.openMessages >= budget.messages * ROLL_AT_BUDGET_SHARE || this.openBytes >= budget.bytes * ROLL_AT_BUDGET_SHARE) {
      for (let s = 0; s < this.shards.length; s++) await this.seal(s);
    }
    // Uploads run in the background; an unreachable sink only delays them (flush reports it as a state).
    if (!this.blocked) void this.startUploads();
    const result = this.takeFinished();
    result.written.push(...duplicates);
    return result;
  }

  private async seal(shard: number): Promise<void> {
    const file = this.shards[shard];
    if (!file) return;
    this.shards[shard] = undefined;
    this.openMessages -= file.records;
    this.openBytes -= file.bytes;
    await file.close();
    this.sealed.push(file);
  }

  async flush(mode: 'due' | 'all'): Promise<WriteResult> {
    this.raiseFault();
    const now = this.now().getTime();
    for (let s = 0; s < this.shards.length; s++) {
      const file = this.shards[s];
      if (file && (mode === 'all' || file.due(this.config, now))) await this.seal(s);
    }
    // A blocked sink is retried here, in the foreground, so the runner sees its state and backs off.
    const retry = this.blocked !== undefined;
    this.blocked = undefined;
    const uploads = this.startUploads();
    if (mode === 'all' || retry) await uploads;
    this.raiseFault();
    if (this.blocked) throw this.stateError(this.blocked);
    return this.takeFinished();
  }

  private takeFinished(): WriteResult {
    const result = this.finished;
    this.finished = emptyResult();
    return result;
  }

  private raiseFault(): void {
    if (this.fault === undefined) return;
    const fault = this.fault;
    this.fault = undefined;
    throw fault;
  }

  /** Runs the upload loop unless it is running; resolves when it stops (nothing left, or blocked). */
  private startUploads(): Promise<void> {
    this.uploading ??= this.uploadAll().finally(() => {
      this.uploading = undefined;
      const { written, failed } = this.finished;
      if (written.length || failed.length) this.context.notify();
    });
    return this.uploading;
  }

  private async uploadAll(): Promise<void> {
    try {
      while (this.sealed.length && !this.blocked) await Promise.all(this.sealed.slice(0, PARALLEL_UPLOADS).map((f) => this.upload(f)));
    } catch (e) {
      this.fault = e;
    }
  }

  /**
   * Per file: manifest "pending", upload, manifest "committed", then its deliveries are written. A
   * sink-wide failure blocks the loop (the file stays in line); a failure of this object alone (a 4xx
   * the sink will always give) fails its deliveries.
   */
  private async upload(file: RollingFile): Promise<void> {
    const { bucket } = this.config;
    this.manifest!.markPending(file.object, file.counter);
    let failure: S3Failure | undefined;
    try {
      const size = (await stat(file.localPath)).size;
      const upload = new Upload({
        client: this.s3!,
        params: { Bucket: bucket, Key: file.object, Body: createReadStream(file.localPath), ContentLength: size },
        partSize: PART_SIZE,
        queueSize: 2,
      });
      await upload.done();
      this.commit(file.manifestEntry(bucket, this.config.format.kind, size));
      this.counters.objectsWritten++;
      this.counters.bytesUploaded += size;
    } catch (e) {
      failure = classifyS3Error(e, bucket);
      this.counters.uploadRetries++;
      if (failure.state) {
        this.blocked = failure;
        return;
      }
      this.manifest!.discard(file.object);
    }
    this.sealed.splice(this.sealed.indexOf(file), 1);
    await file.remove();
    // Into whatever result the next call takes (not one captured before the awaits above).
    if (failure) this.finished.failed.push(...file.deliveries.map((em) => ({ id: em.id, error: failure.message, retryable: true })));
    else this.finished.written.push(...file.deliveries.map((em) => em.id));
  }

  async close(): Promise<void> {
    await this.uploading;
    // Never uploaded, so never acked: their messages come again, and the files are of no use.
    for (const file of [...this.shards, ...this.sealed]) {
      await file?.close();
      await file?.remove();
    }
    this.shards.fill(undefined);
    this.sealed.length = 0;
    this.manifest?.close();
    this.manifest = undefined;
    this.s3?.destroy();
    this.s3 = undefined;
  }
}

/** A subscription's folder: `<dataDir>/object-storage/<project>/<subscription id>/<uid>` (see subscriptionDir). */
function exportDir(dataDir: string, subscription: { name: string; uid: string }): string {
  return subscriptionDir(join(dataDir, 'object-storage'), subscription);
}

/** Where a subscription's manifest lives under the job's data directory. */
export function manifestPath(dataDir: string, subscription: { name: string; uid: string }): string {
  return join(exportDir(dataDir, subscription), 'manifest.jsonl');
}
