import { createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { statusOf } from '../../src/job/metrics.js';
import { tempDir } from '../helpers/temp-dir.js';
import { openExport } from '../helpers/export.js';
import { waitFor } from '../helpers/wait-for.js';

const SUBSCRIPTION = 'projects/p/subscriptions/to-s3';

/** An S3 endpoint that accepts connections, reads what it is sent, and never answers. */
async function silentEndpoint(): Promise<{ url: string; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('data', () => undefined);
    socket.on('error', () => undefined);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('an S3 endpoint that accepts connections and never answers', () => {
  it('times its requests out (objectStorage.idleTimeoutSeconds) and shows RESOURCE_ERROR, keeping the backlog', async () => {
    const endpoint = await silentEndpoint();
    cleanups.push(() => endpoint.close());
    const dir = tempDir('orderly-silent-s3-');
    cleanups.push(async () => dir.remove());
    const objectStorage = {
      endpoint: endpoint.url,
      region: 'us-east-1',
      accessKeyId: 'a',
      secretAccessKey: 'b',
      forcePathStyle: true,
      idleTimeoutSeconds: 1,
    };
    const env = await openExport(dir.path, { objectStorage });
    cleanups.push(() => env.close());
    await env.core.createTopic('events');
    await env.core.createSubscription('to-s3', {
      topic: 'events',
      enableMessageOrdering: true,
      cloudStorageConfig: { bucket: 'silent', maxMessages: 1000, textConfig: {} },
    });
    await env.exports.sync();
    await env.core.publish('events', [{ data: 'one', orderingKey: 'k' }]);
    // Before the idle timeout was a socket timeout, the first request waited for an answer for good: ACTIVE, no error.
    await waitFor('RESOURCE_ERROR', () => env.core.getSubscription('to-s3').state === 'RESOURCE_ERROR', 30_000);
    const status = statusOf(env.core, env.exports).find((s) => s.subscription === SUBSCRIPTION)!;
    expect(status).toMatchObject({ state: 'RESOURCE_ERROR', backlog: 1 });
    expect(status.stateReason).toMatch(/object storage unreachable for bucket silent — TimeoutError.*1000 ms of inactivity/);
  });
});
