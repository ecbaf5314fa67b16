import { afterAll, beforeAll, expect, it } from 'vitest';
import { startObservingProxy } from '../../test/faults/observing-proxy.js';
import { tempDir } from '../../test/helpers/temp-dir.js';
import { openExport } from '../../test/helpers/export.js';
import { waitFor } from '../../test/helpers/wait-for.js';
import { startTestS3, type TestS3 } from '../../test/helpers/s3.js';

let s3: TestS3;
beforeAll(async () => {
  s3 = await startTestS3();
});
afterAll(() => s3.close());

it('a file sealed while the other lane uploads starts uploading at once, not after that upload', async () => {
  // The first object's PutObject waits in the proxy until released: one lane stays busy with it.
  const puts = (r: { method: string; url: string }) => r.method === 'PUT' && !r.url.includes('uploadId=');
  let holding = true;
  const proxy = await startObservingProxy(s3.settings.endpoint, (r) => puts(r) && holding && !(holding = false));
  const dir = tempDir('orderly-lanes-');
  const env = await openExport(dir.path, { objectStorage: { ...s3.settings, endpoint: proxy.url } });
  try {
    const bucket = await s3.bucket();
    await env.core.createTopic('events');
    await env.core.createSubscription('to-s3', { topic: 'events', cloudStorageConfig: { bucket, maxMessages: 1000, textConfig: {} } });
    await env.exports.sync();
    const batch = (from: number) => Array.from({ length: 1000 }, (_, i) => ({ data: `m${from + i}` }));
    await env.core.publish('events', batch(0));
    await waitFor('the first upload, held in the proxy', () => proxy.seen.filter(puts).length === 1);
    await env.core.publish('events', batch(1000));
    // The second file rolls at 1000 messages too; the other lane takes it while the first is still held.
    await waitFor('the second upload, done while the first is held', () => proxy.seen.some((r) => puts(r) && r.status === 200));
    expect(proxy.seen.filter(puts).map((r) => r.status)).toEqual([undefined, 200]);
    proxy.release();
    await waitFor('both files committed', () => env.exports.runner('to-s3')!.stats.written === 2000);
    expect((await s3.list(bucket)).length).toBe(2);
  } finally {
    proxy.release();
    await env.close();
    await proxy.close();
    dir.remove();
  }
});

it('an upload that hangs (the endpoint stops answering, idle timeout far off) shows as stalled in status, and clears once it ends', async () => {
  const puts = (r: { method: string; url: string }) => r.method === 'PUT' && !r.url.includes('uploadId=');
  const proxy = await startObservingProxy(s3.settings.endpoint, puts);
  const dir = tempDir('orderly-lanes-');
  // The write calls all return (uploads run in the background): only the upload itself can tell.
  const env = await openExport(
    dir.path,
    { objectStorage: { ...s3.settings, endpoint: proxy.url, idleTimeoutSeconds: 3600 } },
    { runner: { stallMs: 300 } },
  );
  try {
    const bucket = await s3.bucket();
    await env.core.createTopic('events');
    await env.core.createSubscription('to-s3', { topic: 'events', cloudStorageConfig: { bucket, maxMessages: 1000, textConfig: {} } });
    await env.exports.sync();
    await env.core.publish(
      'events',
      Array.from({ length: 1000 }, (_, i) => ({ data: `m${i}` })),
    );
    const runner = env.exports.runner('to-s3')!;
    await waitFor('the stall in status', () => runner.stats.stalled !== undefined);
    expect(runner.stats.stalled).toMatch(/^the export connector's upload of \S+ has not returned for \d+ s$/);
    expect(runner.stats.written).toBe(0);
    proxy.release();
    await waitFor('the file committed', () => runner.stats.written === 1000);
    await waitFor('the stall cleared', () => runner.stats.stalled === undefined);
  } finally {
    proxy.release();
    await env.close();
    await proxy.close();
    dir.remove();
  }
});
