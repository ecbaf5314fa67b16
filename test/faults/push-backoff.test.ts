import { PubSub } from '@google-cloud/pubsub';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait-for.js';
import { startServe } from '../helpers/serve-process.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

/** A push endpoint answering every request with `status`, keeping the data of the messages it took (200). */
async function endpoint() {
  const state = { status: 503, requests: 0, taken: new Set<string>() };
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      state.requests++;
      if (state.status === 200) state.taken.add(Buffer.from(JSON.parse(body).message.data, 'base64').toString());
      res.writeHead(state.status).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanups.push(() => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/push`, state };
}

describe('push backoff of a whole subscription (Pub/Sub push flow control)', () => {
  it('a failing endpoint is not sent the backlog message by message; once it answers 200 the backlog is delivered whole', async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const push = await endpoint();
    const server = await startServe(['--data-dir', dir.path]);
    cleanups.push(() => server.stop());
    const pubsub = new PubSub({ projectId: 'p', apiEndpoint: server.host, emulatorMode: true });
    cleanups.push(() => pubsub.close());
    const [topic] = await pubsub.createTopic('orders');
    const messages = 1000;
    await topic.createSubscription('orders-push', { pushConfig: { pushEndpoint: push.url } });
    await Promise.all(Array.from({ length: messages }, (_, i) => topic.publishMessage({ data: Buffer.from(`m-${i}`) })));

    await waitFor('the first push', () => push.state.requests > 0);
    // Before, each message of the backlog was tried at full speed and only then waited: thousands of
    // requests in this time against an endpoint that failed every one.
    await new Promise((r) => setTimeout(r, 3_000));
    expect(push.state.requests).toBeLessThan(messages);

    push.state.status = 200;
    await waitFor('the whole backlog at the endpoint', () => push.state.taken.size === messages, 90_000);
  }, 150_000);
});
