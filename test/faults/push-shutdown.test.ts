import { PubSub } from '@google-cloud/pubsub';
import { getEventListeners } from 'node:events';
import { createServer, type ServerResponse } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_PUSH_EGRESS, post } from '../../src/core/push-egress.js';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait-for.js';
import { startServe, type ServeProcess } from '../helpers/serve-process.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

async function serve(dataDir: string): Promise<ServeProcess> {
  const s = await startServe(['--data-dir', dataDir]);
  cleanups.push(() => s.stop());
  return s;
}

function exited(server: ServeProcess): Promise<void> {
  return new Promise((resolve) => (server.alive() ? server.child.once('exit', () => resolve()) : resolve()));
}

/** A push endpoint that holds each request until told how to answer it, keeping what it received. */
async function heldEndpoint() {
  const received: string[] = [];
  const held: ServerResponse[] = [];
  let answer: number | undefined;
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      received.push(Buffer.from(JSON.parse(body).message.data, 'base64').toString());
      if (answer === undefined) held.push(res);
      else res.writeHead(answer).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanups.push(() => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/push`,
    received,
    /** Answers the held requests and every later one with `status`. */
    answerWith(status: number) {
      answer = status;
      for (const res of held.splice(0)) res.writeHead(status).end();
    },
  };
}

/** Whether the port still takes connections (orderly serve closes its endpoint first when it stops). */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

describe('orderly serve stopping (SIGTERM) with push requests out', () => {
  it('a push answered 200 while the server stops is acked: it is not pushed again after a restart', async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const endpoint = await heldEndpoint();
    const first = await serve(dir.path);
    const pubsub = new PubSub({ projectId: 'p', apiEndpoint: first.host, emulatorMode: true });
    const [topic] = await pubsub.createTopic('orders');
    await topic.createSubscription('orders-push', {
      pushConfig: { pushEndpoint: endpoint.url },
      enableMessageOrdering: true,
      ackDeadlineSeconds: 60,
    });
    const ordered = pubsub.topic('orders', { messageOrdering: true });
    await ordered.publishMessage({ data: Buffer.from('before'), orderingKey: 'k' });
    await waitFor('the push request', () => endpoint.received.length === 1);
    await pubsub.close();

    first.child.kill('SIGTERM');
    // The API port closes first, then the store's users: the endpoint answers a second into that, when
    // the core had already been closed (and the answer was thrown away).
    await waitFor('the server stopping', async () => !(await listening(first.port)));
    await new Promise((r) => setTimeout(r, 1_000));
    endpoint.answerWith(200);
    await exited(first);

    const second = await serve(dir.path);
    const again = new PubSub({ projectId: 'p', apiEndpoint: second.host, emulatorMode: true });
    cleanups.push(() => again.close());
    // Same key, ordered: 'after' is pushed only once 'before' is acked, so it ends the wait either way.
    await again.topic('orders', { messageOrdering: true }).publishMessage({ data: Buffer.from('after'), orderingKey: 'k' });
    await waitFor('the message published after the restart', () => endpoint.received.includes('after'));
    expect(endpoint.received).toEqual(['before', 'after']);
  }, 60_000);

  it('an endpoint that never answers does not keep the server from stopping until the ack deadline', async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const endpoint = await heldEndpoint();
    const server = await serve(dir.path);
    const pubsub = new PubSub({ projectId: 'p', apiEndpoint: server.host, emulatorMode: true });
    const [topic] = await pubsub.createTopic('orders');
    await topic.createSubscription('orders-push', { pushConfig: { pushEndpoint: endpoint.url }, ackDeadlineSeconds: 600 });
    await topic.publishMessage({ data: Buffer.from('held') });
    await waitFor('the push request', () => endpoint.received.length === 1);
    await pubsub.close();

    // stop() sends SIGTERM and kills with SIGKILL if the process is still there 10 s later.
    await server.stop();
    expect(server.child.signalCode).toBeNull();
    expect(server.child.exitCode).toBe(0);
  }, 60_000);

  it("a request Node refuses to send (a header value beyond Latin-1) leaves no listener on the caller's signal", async () => {
    const shutdown = new AbortController();
    const request = post(
      'http://127.0.0.1:9/push',
      '{}',
      { 'x-key': '日本' },
      { timeoutMs: 600_000, egress: DEFAULT_PUSH_EGRESS, signal: shutdown.signal },
    );
    await expect(request).rejects.toMatchObject({ code: 'ERR_INVALID_CHAR' });
    // Set before the request was made, the listener (and a timer of the whole timeout) stayed for each attempt.
    expect(getEventListeners(shutdown.signal, 'abort')).toEqual([]);
  });

  it('a request the endpoint never answers still ends at its timeout when the shutdown signal is given too (after a GC)', async () => {
    const endpoint = await heldEndpoint();
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const shutdown = new AbortController();
    const request = post(
      endpoint.url,
      JSON.stringify({ message: { data: '' } }),
      {},
      {
        timeoutMs: 300,
        egress: DEFAULT_PUSH_EGRESS,
        signal: shutdown.signal,
      },
    );
    await waitFor('the push request', () => endpoint.received.length === 1);
    // A timeout signal only combined (AbortSignal.any) is held weakly: collected, the request never ended.
    gc();
    await expect(request).rejects.toMatchObject({ name: 'AbortError' });
  }, 10_000);
});
