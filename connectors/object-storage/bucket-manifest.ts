import { DeleteObjectCommand, GetObjectCommand, HeadObjectCommand, ListObjectsV2Command, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { pathSegment } from '../../src/connector/sink-paths.js';
import { projectOf, shortId } from '../../src/core/names.js';
import type { Logger } from '../../src/log.js';
import type { ManifestObject } from './manifest.js';
import { BucketFailure, type ManifestLog } from './manifest-log.js';
import { RESERVED_PREFIX } from './object-naming.js';
import { classifyS3Error } from './s3-client.js';

/** Where fleets keep their manifests in a bucket; data objects never start with it (see checkPrefix). */
export const FLEET_MANIFEST_ROOT = `${RESERVED_PREFIX}manifest/`;

/** A pending upload whose object never appeared is dropped after this long (its worker is gone, or failed it). */
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
 * - `pending/<object>.json`: written (with the whole entry) before the upload starts;
 * - `committed/<object>.json`: written once the object is complete, before any of its messages is acked;
 *   then the pending entry is deleted.
 * A worker killed between upload and commit leaves a pending entry whose object exists: whichever worker
 * next settles the manifest (at its start, then every minute) commits it — its messages, which are real
 * and whole, then stand in the manifest view while their redeliveries lose to them (see manifest-view.ts).
 * A pending entry whose object never appeared is dropped after ten minutes.
 */
export class BucketManifest implements ManifestLog {
  private readonly prefix: string;

  constructor(
    private readonly s3: S3Client,
    private readonly bucket: string,
    subscription: { name: string; uid: string },
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
    return `${this.prefix}${kind}/${pathSegment(object)}.json`;
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
    await this.call(() => this.s3.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.key('pending', object) })));
  }

  private async put(key: string, entry: ManifestObject): Promise<void> {
    await this.call(() => this.s3.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: JSON.stringify(entry), ContentType: 'application/json' })));
  }

  /** Commits what was uploaded whole but never committed; drops pending entries whose object never appeared. */
  async recover(): Promise<void> {
    for (const { key, modified } of await listKeys(this.s3, this.bucket, `${this.prefix}pending/`)) {
      const entry = await this.call(() => readJson(this.s3, this.bucket, key));
      if (!entry) continue;
      if (await this.call(() => exists(this.s3, entry.bucket, entry.object))) {
        await this.commit({ ...entry, committedAt: new Date(this.now()).toISOString() });
        this.logger.info({ object: entry.object, worker: entry.worker }, 'committed an object a worker uploaded whole before it stopped');
      } else if (modified < this.now() - STALE_MARKER_MS) {
        await this.discard(entry.object);
      }
    }
  }

  close(): void {
    // nothing held open
  }
}

/** Every committed object of a fleet's manifest, read from the bucket (for the audit, queries and tests). */
export async function readFleetManifest(s3: S3Client, bucket: string, subscription: { name: string; uid: string }): Promise<ManifestObject[]> {
  const keys = await listKeys(s3, bucket, `${fleetManifestPrefix(subscription)}committed/`);
  const entries: ManifestObject[] = [];
  for (let i = 0; i < keys.length; i += PARALLEL_READS) {
    const read = await Promise.all(keys.slice(i, i + PARALLEL_READS).map(({ key }) => readJson(s3, bucket, key)));
    for (const entry of read) if (entry) entries.push(entry);
  }
  return entries;
}

async function listKeys(s3: S3Client, bucket: string, prefix: string): Promise<{ key: string; modified: number }[]> {
  const keys: { key: string; modified: number }[] = [];
  let token: string | undefined;
  do {
    const page = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }));
    for (const o of page.Contents ?? []) if (o.Key) keys.push({ key: o.Key, modified: o.LastModified?.getTime() ?? 0 });
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token);
  return keys;
}

/** A manifest entry, or undefined if it is gone (settled by another worker meanwhile). */
async function readJson(s3: S3Client, bucket: string, key: string): Promise<ManifestObject | undefined> {
  try {
    const res = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
    return JSON.parse(await res.Body!.transformToString()) as ManifestObject;
  } catch (e) {
    if ((e as { name?: string }).name === 'NoSuchKey') return undefined;
    throw e;
  }
}

async function exists(s3: S3Client, bucket: string, key: string): Promise<boolean> {
  try {
    await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
    return true;
  } catch (e) {
    const err = e as { name?: string; $metadata?: { httpStatusCode?: number } };
    if (err.name === 'NotFound' || err.$metadata?.httpStatusCode === 404) return false;
    throw e;
  }
}
