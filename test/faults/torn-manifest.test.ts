import { appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { auditSubscription } from '../../connectors/object-storage/audit.js';
import { parseObjectStorageConfig } from '../../connectors/object-storage/config.js';
import { Manifest, ManifestCorruptError } from '../../connectors/object-storage/manifest.js';
import { committedObjects } from '../helpers/committed-objects.js';
import { manifestPath } from '../../connectors/object-storage/object-writer.js';
import { statusOf } from '../../src/job/metrics.js';
import { tempDir } from '../helpers/temp-dir.js';
import { openExport } from '../helpers/export.js';
import { waitFor } from '../helpers/wait-for.js';
import { startTestS3, type TestS3 } from '../helpers/s3.js';

/**
 * Issue #9.4: a crash mid-append leaves a torn last manifest line. The next run appended after the
 * fragment, so the run after that found a corrupt line in the middle and its export stopped for good
 * while the subscription said ACTIVE.
 */
let s3: TestS3;
beforeAll(async () => {
  s3 = await startTestS3();
});
afterAll(async () => s3.close());

let dir: ReturnType<typeof tempDir>;
let bucket: string;
beforeEach(async () => {
  dir = tempDir();
  bucket = await s3.bucket();
});
afterEach(() => dir.remove());

const config = () => ({ bucket, filenameDatetimeFormat: 'YYYY-MM-DDThh:mm:ssZ', avroConfig: { writeMetadata: true } });
const KEYS = 10;

/** One run of the job: `before`, then `count` new messages exported, then a stop (files finalized). */
async function run(before: (env: Awaited<ReturnType<typeof openExport>>) => Promise<void>, round: number, count = 100) {
  const env = await openExport(dir.path, { objectStorage: s3.settings });
  try {
    if (!env.core.hasTopic('events')) {
      await env.core.createTopic('events');
      await env.core.createSubscription('files', { topic: 'events', enableMessageOrdering: true, cloudStorageConfig: config() });
    }
    await env.exports.sync();
    await before(env);
    await env.core.publish(
      'events',
      Array.from({ length: count }, (_, i) => ({ data: `r${round}-${i}`, orderingKey: `k${i % KEYS}` })),
    );
    // Everything unacked is in the writer's files; stopping finalizes and acks them.
    await waitFor('held', () => env.exports.runner('files')!.outstanding >= env.core.metrics('files').backlogMessages);
    return { name: env.core.subscriptionName('files'), uid: env.core.identity('files').uid };
  } finally {
    await env.close();
  }
}

async function audit(subscription: { name: string; uid: string }) {
  return auditSubscription(subscription, parseObjectStorageConfig(config()), { dataDir: dir.path, objectStorage: s3.settings });
}

const clean = (records: number) => ({
  records,
  keys: KEYS,
  missing: { count: 0 },
  duplicates: { count: 0 },
  outOfOrderInFile: { count: 0 },
  objectErrors: { count: 0 },
});

describe('a torn last manifest line', () => {
  it('is cut off at the next start: the next two runs work and the audit is clean', async () => {
    const subscription = await run(async () => undefined, 1);
    const path = manifestPath(dir.path, subscription);
    const lines = readFileSync(path, 'utf8').trim().split('\n');
    // A crash mid-append: half of a line, no newline.
    appendFileSync(path, lines.at(-1)!.slice(0, Math.floor(lines.at(-1)!.length / 2)));

    await run(async () => undefined, 2);
    await run(async () => undefined, 3);

    const text = readFileSync(path, 'utf8');
    expect(text.endsWith('\n')).toBe(true);
    for (const line of text.trim().split('\n')) expect(() => JSON.parse(line)).not.toThrow();
    expect(await audit(subscription)).toMatchObject(clean(300));
    expect(await s3.list(bucket)).toEqual(committedObjects(path));
  });
});

describe('a corrupt line before the last one', () => {
  it('stops the export visibly (RESOURCE_ERROR naming the file and line, backlog kept) until it is repaired', async () => {
    const subscription = await run(async () => undefined, 1, 50);
    const path = manifestPath(dir.path, subscription);
    const good = readFileSync(path, 'utf8');
    const lines = good.split('\n');
    writeFileSync(path, [lines[0], '{"type":"committed","obj', ...lines.slice(1)].join('\n'));

    await run(
      async (env) => {
        await waitFor('RESOURCE_ERROR', () => env.core.getSubscription('files').state === 'RESOURCE_ERROR');
        const row = statusOf(env.core, env.exports).find((s) => s.subscription === subscription.name)!;
        expect(row.state).toBe('RESOURCE_ERROR');
        expect(row.stateReason).toContain(`manifest ${path} is corrupt at line 2`);
        expect(row.exportErrors).toBeGreaterThan(0);
        await env.core.publish('events', [{ data: 'while broken', orderingKey: 'k0' }]);
        await new Promise((r) => setTimeout(r, 300));
        expect(env.core.metrics('files').backlogMessages).toBe(1); // nothing acked, nothing dead-lettered
        expect(env.core.getSubscription('files').state).toBe('RESOURCE_ERROR');
        writeFileSync(path, good); // repaired by hand
        await waitFor('ACTIVE again', () => env.core.getSubscription('files').state === 'ACTIVE');
      },
      2,
      50,
    );

    expect(await audit(subscription)).toMatchObject(clean(101));
  });
});

describe('reading a manifest', () => {
  it('reads the entry after a fragment that versions before the repair left inside a line', () => {
    const path = `${dir.path}/manifest.jsonl`;
    const entry = (object: string) =>
      JSON.stringify({
        type: 'committed',
        object,
        bucket,
        format: 'text',
        createdAt: '',
        committedAt: '',
        records: 1,
        bytes: 1,
        keys: {},
        unkeyed: [],
      });
    const text = `${entry('a')}\n{"type":"pending","obj${entry('b')}\n`;
    writeFileSync(path, text);
    expect(committedObjects(path)).toEqual(['a', 'b']);
    new Manifest(path).close();
    expect(readFileSync(path, 'utf8')).toBe(text);
    writeFileSync(path, `${entry('a')}\nnot json\n${entry('b')}\n`);
    expect(() => new Manifest(path)).toThrow(ManifestCorruptError);
    expect(() => new Manifest(path)).toThrow(`manifest ${path} is corrupt at line 2`);
  });
});
