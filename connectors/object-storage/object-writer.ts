import { HeadBucketCommand, type S3Client } from '@aws-sdk/client-s3';
import { existsSync, mkdirSync, rmdirSync, rmSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { emptyResult, type Connector, type ConnectorContext, type ExportMessage, type WriteResult } from '../../src/connector/connector.js';
import { FailedKeys } from '../../src/connector/failed-keys.js';
import { keyHash } from '../../src/connector/key-hash.js';
import { LoopSlicer } from '../../src/connector/loop-slicer.js';
import { RedeliveryFilter, RememberedIds, retentionCutoff } from '../../src/connector/redelivery-filter.js';
import { subscriptionDir } from '../../src/connector/sink-paths.js';
import { durableRename } from '../../src/store/durable-file.js';
import { BucketManifest } from './bucket-manifest.js';
import type { ObjectStorageConfig } from './config.js';
import type { ManifestObject } from './manifest.js';
import { BucketFailure, LocalManifestLog, type ManifestLog } from './manifest-log.js';
import { newWriterTag, objectNamer, uniqueId, type ObjectNamer } from './object-naming.js';
import type { ParquetScratch } from './parquet-scratch.js';
import { RecordConversionError } from './record-format.js';
import { RollingFile } from './rolling-file.js';
import { classifyS3Error, createS3Client, s3Connection } from './s3-client.js';
import { stateError, UploadQueue } from './upload-queue.js';

/** Open files roll at this share of the runner's budget, so several files are in the pipeline. */
const ROLL_AT_BUDGET_SHARE = 1 / 4;
/**
 * A write waits for uploads while the files in line hold this share of the budget: the open files
 * (at most a quarter) and those in line then stay below the budget, so the runner never has to stop
 * everything for a `flush('all')` while the next files could be filling.
 */
const QUEUE_BUDGET_SHARE = 1 / 2;
/** The longest a write waits for uploads: the runner's flush interval, so its state and flushes keep their pace. */
const UPLOAD_WAIT_MS = 1_000;
/** How often a fleet's writer settles uploads other workers left unfinished. */
const RECOVER_EVERY_MS = 60_000;

/**
 * The object-storage writer (Cloud Storage-subscription style). Each shard fills one rolling file at a
 * time; a key always maps to the same shard (stable hash), so its records stay in delivery order inside
 * and across that shard's files. A file rolls on maxMessages or maxBytes (during `write`), maxDuration
 * (`flush('due')`), or when the open files hold a quarter of the runner's budget (so the next files fill
 * while these upload). Rolled files go to the upload queue, are committed to the manifest, and only then
 * reported written (from the next call, after `notify`), so a message is acked only once the object
 * holding it is complete. A redelivery of what a committed object already holds (a crash between commit
 * and ack) is acked without being written again (RedeliveryFilter).
 *
 * The manifest: for an export of the embedded core, a file under the job's data directory, kept under the
 * subscription's uid (a subscription created again under the same name starts with an empty one); for a
 * subscription a fleet of workers shares (`context.fleet`), the bucket itself (BucketManifest), where any
 * machine sees every worker's objects.
 */
export class ObjectStorageWriter implements Connector {
  private s3?: S3Client;
  private manifest?: ManifestLog;
  private uploads?: UploadQueue;
  private readonly namer: ObjectNamer;
  private readonly shards: (RollingFile | undefined)[];
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
  readonly counters = { objectsWritten: 0, bytesUploaded: 0, uploadRetries: 0 };
  private readonly ids = new RememberedIds();
  private readonly filter: RedeliveryFilter;
  private idsPrunedAt = 0;
  private recoveredAt = 0;
  private recovering?: Promise<void>;
  /** Held from open to close by a Parquet export. */
  private parquetScratch?: ParquetScratch;

  constructor(
    private readonly config: ObjectStorageConfig,
    private readonly context: ConnectorContext,
    private readonly now: () => Date = () => new Date(),
  ) {
    this.namer = objectNamer(config.filenamePrefix, config.filenameSuffix, config.filenameDatetimeFormat);
    this.shards = new Array<RollingFile | undefined>(config.shards).fill(undefined);
    const subscription = { name: context.subscription, uid: context.identity.uid };
    this.spillDir = join(exportDir(context.settings.dataDir, subscription), 'spill');
    this.manifestPath = manifestPath(context.settings.dataDir, subscription);
    this.filter = new RedeliveryFilter(this.ids, context.spec.enableMessageOrdering);
  }

  async open(): Promise<void> {
    this.s3 ??= createS3Client(s3Connection(this.context.settings.objectStorage as Record<string, unknown> | undefined));
    try {
      await this.s3.send(new HeadBucketCommand({ Bucket: this.config.bucket }));
    } catch (e) {
      throw stateError(classifyS3Error(e, this.config.bucket));
    }
    if (!this.manifest) {
      // Spill files of a previous run hold messages that were never acked: they come again.
      await rm(this.spillDir, { recursive: true, force: true });
      await mkdir(this.spillDir, { recursive: true });
      if (this.config.format.kind === 'parquet')
        this.parquetScratch ??= (await import('./parquet-scratch.js')).acquireParquetScratch(this.context.settings.dataDir);
      const manifest = this.openManifest(this.s3);
      for (const entry of manifest.committedAtOpen()) this.remember(entry);
      // A fleet's workers name objects apart by their tags; a counter from the clock keeps one worker's
      // names, across its restarts, in the order it opened them.
      this.nameCounter = this.context.fleet ? Math.max(1, Math.floor(this.now().getTime() / 1000) * 1_000_000) : manifest.lastCounter() + 1;
      this.manifest = manifest;
      this.uploads = new UploadQueue({
        s3: this.s3,
        bucket: this.config.bucket,
        format: this.config.format.kind,
        manifest,
        worker: this.context.fleet?.workerId,
        counters: this.counters,
        committed: (entry) => this.remember(entry),
        notify: () => this.context.notify(),
      });
    }
    try {
      await this.manifest.recover();
    } catch (e) {
      if (e instanceof BucketFailure) throw stateError(e.failure);
      throw e;
    }
    this.recoveredAt = this.now().getTime();
  }

  private openManifest(s3: S3Client): ManifestLog {
    const { context, config } = this;
    if (context.fleet)
      return new BucketManifest(
        s3,
        config.bucket,
        { name: context.subscription, uid: context.identity.uid },
        context.fleet.workerId,
        context.logger,
      );
    if (context.identity.adoptsNameKeyedProgress) this.adoptNameKeyedManifest();
    return new LocalManifestLog(this.manifestPath, s3, config.bucket, context.logger);
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

  private shardOf(em: ExportMessage): number {
    return keyHash(em.message.orderingKey || em.message.messageId) % this.shards.length;
  }

  /** A committed object's per-key ranges and ids: what a redelivery may bring again. */
  private remember(entry: ManifestObject): void {
    // for-in, not Object.entries: no [key, range] array per key (thousands per object, each upload).
    for (const key in entry.keys) {
      const range = entry.keys[key]!;
      this.filter.addRange(key, range.first, range.last);
    }
    const committedAt = Date.parse(entry.committedAt);
    if (committedAt < this.expiredBefore()) return;
    for (const id of entry.unkeyed) this.ids.add(id, committedAt);
    for (const id of entry.ids ?? []) this.ids.add(id, committedAt);
    for (const [id] of entry.messages ?? []) this.ids.add(id, committedAt);
  }

  /**
   * Messages of objects committed before this were published before it too: past the subscription's
   * messageRetentionDuration, so never delivered again, and their ids need not be remembered.
   */
  private expiredBefore(): number {
    return retentionCutoff(this.context.spec, this.now().getTime());
  }

  /** At most once a minute, forgets the ids no redelivery can bring again. */
  private forgetExpiredIds(): void {
    const now = this.now().getTime();
    if (now - this.idsPrunedAt < 60_000) return;
    this.idsPrunedAt = now;
    this.ids.forgetBefore(this.expiredBefore());
  }

  async write(batch: ExportMessage[]): Promise<WriteResult> {
    const uploads = this.uploads!;
    uploads.raiseFault();
    this.forgetExpiredIds();
    const duplicates: string[] = [];
    // A message the format cannot take fails; later ones of its key wait (key order).
    const refused = emptyResult();
    const failedKeys = new FailedKeys(this.context.spec.enableMessageOrdering);
    const written = await this.filter.written(batch);
    const { budget } = this.context;
    const slicer = new LoopSlicer();
    for (const em of batch) {
      if (slicer.due) await slicer.yield();
      if (written.has(em.id)) {
        duplicates.push(em.id);
        continue;
      }
      if (failedKeys.blocks(em.message)) {
        refused.deferred.push(em.id);
        continue;
      }
      const s = this.shardOf(em);
      if (this.shards[s] && !this.shards[s].fits(this.context.subscription, em, this.config)) this.seal(s);
      let file = this.shards[s];
      if (!file) {
        const openedAt = this.now();
        const counter = this.nameCounter++;
        const object = this.namer.name(openedAt, uniqueId(counter, this.writerTag));
        file = await RollingFile.open(object, counter, join(this.spillDir, `${++this.spillCounter}.part`), openedAt, this.config, {
          detailed: this.context.fleet !== undefined,
          topicSchema: () => this.context.topicSchema?.(),
          parquetScratch: this.parquetScratch,
        });
        this.shards[s] = file;
      }
      const bytes = file.bytes;
      try {
        const written = file.append(this.context.subscription, em, this.filter.mark(em.message));
        if (written) await written;
      } catch (e) {
        if (!(e instanceof RecordConversionError)) throw e;
        refused.failed.push({ id: em.id, error: e.message, retryable: false });
        failedKeys.fail(em.message);
        if (!file.records) {
          // Nothing in it: not a file to upload.
          this.shards[s] = undefined;
          await file.close();
          await file.remove();
        }
        continue;
      }
      this.openMessages++;
      this.openBytes += file.bytes - bytes;
      if (file.full(this.config)) this.seal(s);
      // Checked message by message: a batch can be the runner's whole budget (a drained backlog of 100 KB
      // messages came as one 64 MiB batch into one Parquet file, more than DuckDB's memory limit could write).
      if (this.openMessages >= budget.messages * ROLL_AT_BUDGET_SHARE || this.openBytes >= budget.bytes * ROLL_AT_BUDGET_SHARE) {
        for (let open = 0; open < this.shards.length; open++) this.seal(open);
      }
    }
    // Uploads run in the background; an unreachable sink only delays them (flush reports it as a state).
    uploads.kick();
    await uploads.waitBelow(budget.messages * QUEUE_BUDGET_SHARE, budget.bytes * QUEUE_BUDGET_SHARE, UPLOAD_WAIT_MS);
    const result = uploads.take();
    result.written.push(...duplicates);
    result.failed.push(...refused.failed);
    result.deferred.push(...refused.deferred);
    return result;
  }

  /**
   * Closes the shard's file in the background and puts it in line for upload, which waits for the close:
   * the next file fills meanwhile (a Parquet file's encoding, awaited here, was a fifth of its export's
   * time). A failed close fails the upload lane, and so the connector, from its next call.
   */
  private seal(shard: number): void {
    const file = this.shards[shard];
    if (!file) return;
    this.shards[shard] = undefined;
    this.openMessages -= file.records;
    this.openBytes -= file.bytes;
    this.uploads!.add(file);
    // Observed here so a failure that no lane awaits yet (a blocked sink) is not an unhandled rejection.
    file.close().catch(() => undefined);
  }

  async flush(mode: 'due' | 'all'): Promise<WriteResult> {
    const uploads = this.uploads!;
    uploads.raiseFault();
    const now = this.now().getTime();
    for (let s = 0; s < this.shards.length; s++) {
      const file = this.shards[s];
      if (file && (mode === 'all' || file.due(this.config, now))) this.seal(s);
    }
    if (this.context.fleet && now - this.recoveredAt >= RECOVER_EVERY_MS) this.recoverInBackground(now);
    await uploads.settle(mode === 'all');
    return uploads.take();
  }

  /** Settles what other workers of the fleet left unfinished; a failure is only logged (retried in a minute). */
  private recoverInBackground(now: number): void {
    this.recoveredAt = now;
    this.recovering ??= this.manifest!.recover()
      .catch((e: unknown) =>
        this.context.logger.warn(
          { error: (e as Error).message },
          'settling unfinished uploads in the bucket manifest failed; retried in a minute',
        ),
      )
      .finally(() => (this.recovering = undefined));
  }

  /** Uploads run in the background: one that hangs (an endpoint that stopped answering) shows as stalled. */
  busy(): { name: string; since: number } | undefined {
    return this.uploads?.oldestUpload();
  }

  async close(): Promise<void> {
    const unsent = (await this.uploads?.stop()) ?? [];
    await this.recovering;
    // Never uploaded, so never acked: their messages come again, and the files are of no use.
    // Each file is closed (whether that works does not matter) before it is removed, all of them before
    // this returns: a file still closing in the background must not write into the spill folder of the
    // connector that opens next.
    const removed = await Promise.allSettled(
      [...this.shards, ...unsent].map(async (file) => {
        await file?.close().catch(() => undefined);
        await file?.remove();
      }),
    );
    this.shards.fill(undefined);
    this.uploads = undefined;
    this.manifest?.close();
    this.manifest = undefined;
    this.s3?.destroy();
    this.s3 = undefined;
    // After every file closed: none encodes in the scratch any more.
    await this.parquetScratch?.release();
    this.parquetScratch = undefined;
    const failed = removed.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
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
