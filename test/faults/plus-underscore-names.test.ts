import fc from 'fast-check';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { auditSubscription } from '../../connectors/object-storage/audit.js';
import { parseObjectStorageConfig } from '../../connectors/object-storage/config.js';
import { committedObjects } from '../helpers/committed-objects.js';
import { manifestPath } from '../../connectors/object-storage/object-writer.js';
import { pathSegment } from '../../src/connector/sink-paths.js';
import { tempDir } from '../helpers/temp-dir.js';
import { openExport } from '../helpers/export.js';
import { waitFor } from '../helpers/wait-for.js';
import { startTestS3, type TestS3 } from '../helpers/s3.js';

/**
 * Issue #9.3: names that differ only in `+ % ~` vs `_` were folded into one export folder, so
 * subscriptions shared a manifest and spill files: one's objects held the other's records, and its own
 * messages were acked and written nowhere.
 */
let s3: TestS3;
beforeAll(async () => {
  s3 = await startTestS3();
});
afterAll(async () => s3.close());

let dir: ReturnType<typeof tempDir>;
let env: Awaited<ReturnType<typeof openExport>>;
beforeEach(async () => {
  dir = tempDir();
  env = await openExport(dir.path, { objectStorage: s3.settings });
});
afterEach(async () => {
  await env.close();
  dir.remove();
});

const PER_SUBSCRIPTION = 300;
const config = (bucket: string) => ({ bucket, filenameDatetimeFormat: 'YYYY-MM-DDThh:mm:ssZ', textConfig: {} });

/** Each subscription reads its own topic; every payload starts with the subscription's tag. */
async function exportConcurrently(bucket: string, subs: { name: string; topic: string; tag: string }[]): Promise<void> {
  for (const s of subs) {
    await env.core.createTopic(s.topic);
    await env.core.createSubscription(s.name, { topic: s.topic, enableMessageOrdering: true, cloudStorageConfig: config(bucket) });
  }
  await env.exports.sync();
  for (let i = 0; i < PER_SUBSCRIPTION; i += 50) {
    await Promise.all(
      subs.map((s) =>
        env.core.publish(
          s.topic,
          Array.from({ length: 50 }, (_, j) => ({ data: `${s.tag}:k${(i + j) % 10}:${i + j}`, orderingKey: `k${(i + j) % 10}` })),
        ),
      ),
    );
  }
  for (const s of subs) {
    await waitFor(`${s.name} delivered`, () => {
      const runner = env.exports.runner(s.name);
      return (runner?.outstanding ?? 0) + (runner?.stats.written ?? 0) >= PER_SUBSCRIPTION;
    });
  }
  await env.exports.stop();
}

async function linesOf(bucket: string, object: string): Promise<string[]> {
  return (await s3.get(bucket, object)).toString().trim().split('\n');
}

function expected(tag: string): string[] {
  return Array.from({ length: PER_SUBSCRIPTION }, (_, i) => `${tag}:k${i % 10}:${i}`).sort();
}

describe('subscriptions whose names differ only in + ~ vs _', () => {
  it('export concurrently to one bucket, each into its own objects and manifest, every message once', async () => {
    const bucket = await s3.bucket();
    const subs = [
      { name: 'orders+x', topic: 'plus', tag: 'plus' },
      { name: 'orders_x', topic: 'under', tag: 'under' },
      { name: 'orders~x', topic: 'tilde', tag: 'tilde' },
    ];
    await exportConcurrently(bucket, subs);

    // The bucket as a whole: no object mixes subscriptions, and each one's messages are there once.
    const all = new Map<string, string[]>();
    for (const object of await s3.list(bucket)) {
      const lines = await linesOf(bucket, object);
      const tags = new Set(lines.map((l) => l.split(':')[0]));
      expect(tags.size, `${object} holds records of ${[...tags].join(', ')}`).toBe(1);
      const tag = [...tags][0]!;
      all.set(tag, [...(all.get(tag) ?? []), ...lines]);
    }
    for (const s of subs) expect(all.get(s.tag)?.sort()).toEqual(expected(s.tag));

    // Each subscription's own manifest lists exactly its objects, in its own folder.
    for (const s of subs) {
      const subscription = { name: env.core.subscriptionName(s.name), uid: env.core.identity(s.name).uid };
      const path = manifestPath(dir.path, subscription);
      expect(path).toBe(join(dir.path, 'object-storage', 'p', pathSegment(s.name), subscription.uid, 'manifest.jsonl'));
      const lines: string[] = [];
      for (const object of committedObjects(path)) lines.push(...(await linesOf(bucket, object)));
      expect(lines.sort()).toEqual(expected(s.tag));
      const report = await auditSubscription(subscription, parseObjectStorageConfig(config(bucket)), {
        dataDir: dir.path,
        objectStorage: s3.settings,
      });
      expect(report).toMatchObject({
        records: PER_SUBSCRIPTION,
        keys: 10,
        missing: { count: 0 },
        duplicates: { count: 0 },
        objectErrors: { count: 0 },
      });
      expect(env.core.metrics(s.name).backlogMessages).toBe(0);
    }
    expect(['orders%2Bx', 'orders_x', 'orders%7Ex'].map((f) => existsSync(join(dir.path, 'object-storage', 'p', f)))).toEqual([
      true,
      true,
      true,
    ]);
  });

  it('subscriptions of the same id in two projects export separately', async () => {
    const bucket = await s3.bucket();
    await exportConcurrently(bucket, [
      { name: 'projects/a/subscriptions/orders', topic: 'projects/a/topics/orders', tag: 'a' },
      { name: 'projects/b/subscriptions/orders', topic: 'projects/b/topics/orders', tag: 'b' },
    ]);
    for (const project of ['a', 'b']) {
      const name = `projects/${project}/subscriptions/orders`;
      const path = manifestPath(dir.path, { name, uid: env.core.identity(name).uid });
      expect(path.startsWith(join(dir.path, 'object-storage', project, 'orders'))).toBe(true);
      const lines: string[] = [];
      for (const object of committedObjects(path)) lines.push(...(await linesOf(bucket, object)));
      expect(lines.sort()).toEqual(expected(project));
    }
  });
});

describe('pathSegment', () => {
  it('is one to one, reversible and a safe single path segment', () => {
    const decode = (segment: string) =>
      Buffer.from(
        segment.replace(/%([0-9A-F]{2})|./gs, (c, hex: string | undefined) => (hex ? String.fromCharCode(parseInt(hex, 16)) : c)),
        'latin1',
      ).toString('utf8');
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 120 }), (name) => {
        const segment = pathSegment(name);
        expect(segment).toMatch(/^[A-Za-z0-9._%~-]{1,200}$/);
        expect(['.', '..']).not.toContain(segment);
        // Not shortened: decodes back to the name. Shortened: ends in the hash, and holds no other "~".
        if (!segment.includes('~')) expect(decode(segment)).toBe(name);
        else expect(segment).toMatch(/^[^~]*~[0-9a-f]{32}$/);
      }),
      { numRuns: 2000 },
    );
    fc.assert(
      fc.property(fc.uniqueArray(fc.string({ unit: 'binary', maxLength: 300 }), { minLength: 2, maxLength: 50 }), (names) => {
        expect(new Set(names.map(pathSegment)).size).toBe(names.length);
      }),
      { numRuns: 300 },
    );
    expect(['orders+x', 'orders_x', 'orders~x', 'orders%2Bx', '..', ''].map(pathSegment)).toEqual([
      'orders%2Bx',
      'orders_x',
      'orders%7Ex',
      'orders%252Bx',
      '%2E%2E',
      expect.stringMatching(/^~[0-9a-f]{32}$/),
    ]);
    // A lone surrogate has the UTF-8 bytes of U+FFFD: told apart by the hash.
    expect(new Set(['\uFFFD', '\uD800', '\uDC00'].map(pathSegment)).size).toBe(3);
  });
});
