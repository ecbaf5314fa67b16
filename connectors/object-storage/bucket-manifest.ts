import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { pathSegment } from '../../src/connector/sink-paths.js';
import { projectOf, shortId } from '../../src/core/names.js';
import type { Logger } from '../../src/log.js';
import type { ManifestObject } from './manifest.js';
import { BucketFailure, type ManifestLog } from './manifest-log.js';
import { RESERVED_PREFIX } from './object-naming.js';
import { classifyS3Error } from './s3-client.js';

/** Where fleets keep their manifests in a bucket; data objects never start with it (see checkPrefix). */
export const FLEET_MANIFEST_ROOT = `${RESERVED_PREFIX}manifest/`;

/** Another worker's pending upload is looked at only once it is this old: before, its worker is most likely finishing it. */
const SETTLE_OTHERS_AFTER_MS = 2 * 60_000;
/** Another worker's pending upload whose object never appeared is dropped after this long (its worker is gone, or failed it). */
const STALE_MARKER_MS = 10 * 60_000;
/** Bucket reads at once when a reader loads a manifest. */
const PARALLEL_READS = 16;

/** One subscription's manifest folder in the bucket: `_orderly/manifest/<project>/<subscription id>/<uid>/` (names escaped as by subscriptionDir). */
export function fleetManifestPrefix(subscription: { name: string; uid: string }): string {
  return `${FLEET_MANIFEST_ROOT}${pathSegment(projectOf(subscription.name))}/${pathSegment(shortId(subscription.name))}/${pathSegment(subscription.uid)}/`;
}

/**
 * The manifest of an export that a fleet of workers shares (a remote Pub/Sub subscription), kept in the
 * bucket so that every worker's objects are seen from any machine. Each object has one entry of its own —
 * workers never write the same key, so no two of them contend for a file:
 * - `pending/<worker>/<object>.json`: written (with the whole entry) before the upload starts;
 * - `committed/<object>.json`: written once the object is complete, before any of its messages is acked;
 *   then the pending entry is deleted.
 * A worker killed between upload and commit leaves a pending entry whose object exists. It is committed
 * — its messages, real and whole, then stand in the manifest view and their redeliveries lose to them
 * (see manifest-view.ts) — by the worker that starts next under the same id (at once), or by any worker
 * once it is two minutes old (they look every minute). A pending entry whose object never appeared is
 * dropped by the same id's next start, or by any worker after ten minutes. Committing an object its own
 * worker is committing too writes the same entry twice: harmless. S3 objects appear whole or not at all
 * (a multipart upload only once completed), so an object that exists is never a half-uploaded one.
 */
export class BucketManifest implements ManifestLog {
  private readonly prefix: string;

  private settledOwn = false;

  constructor(
    private readonly s3: S3Client,
    private readonly bucket: string,
    subscription: { name: string; uid: string },
    /** This worker's id: its pending uploads are its own to settle after a restart. */
    private readonly worker: string,
    private readonly logger: Logger,
    private readonly now: () => number = Date.now,
  ) {
    this.prefix = fleetManifestPrefix(subscription);
  }

  committedAtOpen(): ManifestObject[] {
    // Other workers' objects are the manifest view's business; a redelivery of them is resolved there.
    return [];
  }

  lastCounter(): number {
    return 0;
  }

  private key(kind: 'pending' | 'committed', object: string): string {
    return kind === 'pending'
      ? `${this.pendingPrefix()}${pathSegment(object)}.json`
      : `${this.prefix}committed/${pathSegment(object)}.json`;
  }

  private pendingPrefix(worker = this.worker): string {
    return `${this.prefix}pending/${pathSegment(worker)}/`;
  }

  private async call<T>(send: () => Promise<T>): Promise<T> {
    try {
      return await send();
    } catch (e) {
      throw new BucketFailure(classifyS3Error(e, this.bucket));
    }
  }

  async markPending(entry: ManifestObject): Promise<void> {
    await this.put(this.key('pending', entry.object), entry);
  }

  async commit(entry: ManifestObject): Promise<void> {
    await this.put(this.key('committed', entry.object), entry);
    await this.call(() => this.s3.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.key('pending', entry.object) })));
  }

  async discard(object: string): Promise<void> {
    await this.drop(this.key('pending', object));
  }

  private async drop(key: string): Promise<void> {
    await this.call(() => this.s3.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key })));
  }

  private async put(key: string, entry: ManifestObject): Promise<void> {
    await this.call(() =>
      this.s3.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: JSON.stringify(entry), ContentType: 'application/json' })),
    );
  }

  /**
   * Commits what was uploaded whole but never committed; drops pending entries whose object never appeared.
   * The first call (at the worker's start) settles this worker id's own entries, left by its previous run.
   */
  async recover(): Promise<void> {
    const now = this.now();
    const own = this.pendingPrefix();
    const settleOwn = !this.settledOwn;
    for (const { key, modified } of await this.call(() => listKeys(this.s3, this.bucket, `${this.prefix}pending/`))) {
      const mine = key.startsWith(own);
      if (mine ? !settleOwn : modified > now - SETTLE_OTHERS_AFTER_MS) continue;
      const entry = await this.call(() => readJson(this.s3, this.bucket, key));
      if (entry === undefined) continue;
      // A pending entry cut short (its worker died writing it) preceded any upload of its object.
      if (entry === 'unreadable') {
        if (mine || modified < now - STALE_MARKER_MS) await this.drop(key);
        continue;
      }
      const size = await this.call(() => objectSize(this.s3, entry.bucket, entry.object));
      if (size === entry.bytes) {
        await this.put(this.key('committed', entry.object), { ...entry, committedAt: new Date(now).toISOString() });
        await this.drop(key);
        this.logger.info({ object: entry.object, worker: entry.worker }, 'committed an object a worker uploaded whole before it stopped');
      } else if (mine || modified < now - STALE_MARKER_MS) {
        // Never uploaded, or (a store that keeps a cut-off upload) not whole: its messages were not acked.
        if (size !== undefined) await this.call(() => this.s3.send(new DeleteObjectCommand({ Bucket: entry.bucket, Key: entry.object })));
        await this.drop(key);
      }
    }
    this.settledOwn = true;
  }

  close(): void {
    // nothing held open
  }
}

/** Every committed object of a fleet's manifest, read from the bucket (for the audit, queries and tests). */
export async function readFleetManifest(
  s3: S3Client,
  bucket: string,
  subscription: { name: string; uid: string },
): Promise<ManifestObject[]> {
  const keys = await listKeys(s3, bucket, `${fleetManifestPrefix(subscription)}committed/`);
  const entries: ManifestObject[] = [];
  for (let i = 0; i < keys.length; i += PARALLEL_READS) {
    const read = await Promise.all(keys.slice(i, i + PARALLEL_READS).map(({ key }) => readJson(s3, bucket, key)));
    // An entry cut short is being written, or its worker died writing it: its pending entry settles it.
    for (const entry of read) if (entry && entry !== 'unreadable') entries.push(entry);
  }
  return entries;
}

/** The keys under `prefix`, with when each was last written. */
export async function listKeys(s3: S3Client, bucket: string, prefix: string): Promise<{ key: string; modified: number }[]> {
  const keys: { key: string; modified: number }[] = [];
  let token: string | undefined;
  do {
    const page = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }));
    for (const o of page.Contents ?? []) if (o.Key) keys.push({ key: o.Key, modified: o.LastModified?.getTime() ?? 0 });
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token);
  return keys;
}

/** A manifest entry; undefined if it is gone (settled by another worker meanwhile); `unreadable` if it is not whole JSON. */
async function readJson(s3: S3Client, bucket: string, key: string): Promise<ManifestObject | 'unreadable' | undefined> {
  let text: string;
  try {
    const res = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
    text = await res.Body!.transformToString();
  } catch (e) {
    if ((e as { name?: string }).name === 'NoSuchKey') return undefined;
    throw e;
  }
  try {
    const entry = JSON.parse(text) as ManifestObject;
    return typeof entry?.object === 'string' && typeof entry.bytes === 'number' ? entry : 'unreadable';
  } catch {
    return 'unreadable';
  }
}

/** The object's size in bytes, or undefined if there is no such object. */
async function objectSize(s3: S3Client, bucket: string, key: string): Promise<number | undefined> {
  try {
    return (await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key }))).ContentLength;
  } catch (e) {
    const err = e as { name?: string; $metadata?: { httpStatusCode?: number } };
    if (err.name === 'NotFound' || err.$metadata?.httpStatusCode === 404) return undefined;
    throw e;
  }
}
