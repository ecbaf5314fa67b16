import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { tempDir } from '../../test/helpers/temp-dir.js';
import { startTestS3, type TestS3 } from '../../test/helpers/s3.js';
import { auditSubscription } from './audit.js';
import { parseObjectStorageConfig } from './config.js';
import { LocalManifestLog } from './manifest-log.js';
import { ManifestReader } from './manifest-reader.js';
import { manifestPath } from './object-writer.js';
import { parquetView } from './query-view.js';
import { createS3Client, s3Connection } from './s3-client.js';

const dir = tempDir('orderly-manifest-memory-');
afterEach(() => dir.remove());
let s3: TestS3;
beforeAll(async () => {
  s3 = await startTestS3();
});
afterAll(() => s3.close());

/** A full collection, so the heap's size is what is still referenced. */
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const liveHeap = () => {
  gc();
  return process.memoryUsage().heapUsed;
};

/** The highest live heap above the heap when it starts, sampled (after a full collection) while `run` runs. */
async function peakLiveHeap<T>(run: () => Promise<T>): Promise<{ result: T; peak: number; samples: number }> {
  const before = liveHeap();
  let peak = 0;
  let samples = 0;
  const timer = setInterval(() => {
    peak = Math.max(peak, liveHeap() - before);
    samples++;
  }, 50);
  try {
    return { result: await run(), peak, samples };
  } finally {
    clearInterval(timer);
  }
}

const OBJECTS = 40;
const KEYS = 5_000;

/**
 * A 1M-message export's manifest in small (201 objects, 633,021 key ranges, 28 MB): OBJECTS committed
 * objects of `format`, each holding one message of every one of KEYS keys, in `bucket`; `bytes` each.
 */
function writeManifest(path: string, { bucket = 'b', format = 'parquet', bytes = 1 } = {}): string[] {
  const lines: string[] = [];
  const names: string[] = [];
  for (let o = 0; o < OBJECTS; o++) {
    const keys: Record<string, { first: number; last: number; count: number }> = {};
    for (let k = 0; k < KEYS; k++) keys[`key-${k}`] = { first: o + 1, last: o + 1, count: 1 };
    const at = new Date(Date.UTC(2026, 0, 1, 0, o)).toISOString();
    const object = `o-${String(o).padStart(3, '0')}`;
    names.push(object);
    lines.push(
      JSON.stringify({
        type: 'committed',
        object,
        bucket,
        format,
        createdAt: at,
        counter: o + 1,
        committedAt: at,
        records: KEYS,
        bytes,
        keys,
        unkeyed: [],
      }),
    );
  }
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, `${lines.join('\n')}\n`);
  return names;
}

/** The heap the whole manifest's entries take, read at once. */
function heapOfAllEntries(path: string): number {
  const before = liveHeap();
  const reader = new ManifestReader(path);
  const entries = reader.committed().map((ref) => reader.read(ref));
  const held = liveHeap() - before;
  reader.close();
  expect(entries).toHaveLength(OBJECTS);
  return held;
}

// A 1M-message Parquet export's manifest (201 objects, 633,021 key ranges, 28 MB): the writer kept every
// entry it read at open for as long as it ran, 56 MB of heap given to nothing after a restart.
it("a writer's local manifest keeps none of the objects committed before it opened once it has read them", () => {
  const path = join(dir.path, 'manifest.jsonl');
  writeManifest(path);
  const s3 = createS3Client(s3Connection({ endpoint: 'http://127.0.0.1:9', region: 'us-east-1', accessKeyId: 'a', secretAccessKey: 'b' }));
  const before = liveHeap();
  const log = new LocalManifestLog(path, s3, 'b', createLogger({ level: 'silent' }));
  try {
    const committed = log.committedAtOpen();
    expect(committed.map((e) => Object.keys(e.keys).length)).toEqual(Array(OBJECTS).fill(KEYS));
    // What it holds once the writer has taken them: 200,000 key ranges, 17 MB, stayed before.
    const held = liveHeap() - before;
    committed.length = 0;
    expect(liveHeap() - before).toBeLessThan(held / 10);
  } finally {
    log.close();
    s3.destroy();
  }
});

/** OBJECTS objects of `bytes` bytes each in a new bucket, and the manifest listing them under a job's data directory. */
async function exportedObjects(format: string, bytes: number) {
  const bucket = await s3.bucket();
  const subscription = { name: 'projects/p/subscriptions/s', uid: 'u1' };
  const path = manifestPath(dir.path, subscription);
  for (const name of writeManifest(path, { bucket, format, bytes })) await s3.minio.putObject(bucket, name, Buffer.alloc(bytes, 'x'));
  return { bucket, subscription, path, settings: { dataDir: dir.path, objectStorage: s3.settings } };
}

// orderly audit read every entry of the manifest before it read the first object, and kept per key every
// object holding it: 525 MiB after a 1M-message export, growing with every message exported.
it('the audit holds one manifest entry at a time, and per key no list of the objects holding it', async () => {
  const { bucket, subscription, path, settings } = await exportedObjects('text', 10);
  const held = heapOfAllEntries(path);
  const { result, peak, samples } = await peakLiveHeap(() =>
    auditSubscription(subscription, parseObjectStorageConfig({ bucket }), settings),
  );
  expect(result).toMatchObject({ objects: OBJECTS, records: OBJECTS * KEYS, keys: KEYS, missing: { count: 0 }, duplicates: { count: 0 } });
  expect(result).toMatchObject({ skewedKeys: { count: 0 }, outOfOrderInFile: { count: 0 }, objectErrors: { count: 0 } });
  // Sampled while it ran (each sample a full collection: a fast run is sampled a few times).
  expect(samples).toBeGreaterThan(0);
  // 200,000 key ranges were 17 MB of entries, held with the lists of objects from start to end; what stays
  // is per key (KeyAudit).
  expect(peak).toBeLessThan(held / 2);
});

// orderly query's view read every entry of the manifest (each object's key ranges, which it never uses)
// and held them while it fetched the objects: 283 MB after a 1M-message export.
it("the query view of a local export holds its objects' names and sizes, not their manifest entries", async () => {
  const { bucket, subscription, path, settings } = await exportedObjects('parquet', 10);
  const held = heapOfAllEntries(path);
  const target = {
    subscription: subscription.name,
    identity: { uid: subscription.uid, adoptsNameKeyedProgress: false },
    config: parseObjectStorageConfig({ bucket, parquetConfig: {} }),
    settings,
  };
  const { result, peak, samples } = await peakLiveHeap(() => parquetView(target));
  expect(result!.files).toHaveLength(OBJECTS);
  // Sampled while it ran (each sample a full collection: a fast run is sampled a few times).
  expect(samples).toBeGreaterThan(0);
  expect(peak).toBeLessThan(held / 10);
});
