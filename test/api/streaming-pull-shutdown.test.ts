import * as grpc from '@grpc/grpc-js';
import { PubSub, type Message } from '@google-cloud/pubsub';
import { afterEach, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait-for.js';
import { rawPubsubClients, startServe, type ServeProcess } from '../helpers/serve-process.js';

const running: ServeProcess[] = [];
afterEach(async () => {
  for (const s of running.splice(0)) await s.stop();
});

async function serve(args: string[]): Promise<ServeProcess> {
  const s = await startServe(args);
  running.push(s);
  return s;
}

function stopped(server: ServeProcess): Promise<void> {
  return new Promise((resolve) => (server.alive() ? server.child.once('exit', () => resolve()) : resolve()));
}

describe('orderly serve stopping (SIGTERM) with StreamingPull streams and Pull calls open', () => {
  it('ends each open stream with UNAVAILABLE (retryable in every Google client), at once, not CANCELLED after a wait', async () => {
    const dir = tempDir();
    try {
      const server = await serve(['--data-dir', dir.path]);
      const api = rawPubsubClients(server.host);
      const topic = 'projects/p/topics/shutdown';
      const subscription = 'projects/p/subscriptions/shutdown';
      await api.pub('createTopic', { name: topic });
      await api.sub('createSubscription', { name: subscription, topic });
      await api.pub('publish', { topic, messages: [{ data: Buffer.from('one') }] });
      const stream = api.subscriber.streamingPull() as grpc.ClientDuplexStream<any, any>;
      let received = 0;
      stream.on('data', (r: { receivedMessages: unknown[] }) => (received += r.receivedMessages.length));
      const ended = new Promise<grpc.StatusObject>((resolve) => stream.on('error', resolve));
      stream.write({ subscription, streamAckDeadlineSeconds: 10 });
      await waitFor('the message on the stream', () => received === 1);
      const signalled = Date.now();
      server.child.kill('SIGTERM');
      const status = await ended;
      // Python's subscriber stops for good on CANCELLED: a server going away is UNAVAILABLE, which every client retries.
      expect(status.code).toBe(grpc.status.UNAVAILABLE);
      expect(Date.now() - signalled).toBeLessThan(1_900); // cut after 2 s before
      await stopped(server);
      api.close();
    } finally {
      dir.remove();
    }
  }, 30_000);

  it('a Pull waiting for messages is answered UNAVAILABLE at once, not CANCELLED after a wait', async () => {
    const dir = tempDir();
    try {
      const server = await serve(['--data-dir', dir.path]);
      const api = rawPubsubClients(server.host);
      const topic = 'projects/p/topics/waiting';
      const subscription = 'projects/p/subscriptions/waiting';
      await api.pub('createTopic', { name: topic });
      await api.sub('createSubscription', { name: subscription, topic });
      // Nothing to pull: the call waits (returnImmediately false) when the server is told to stop.
      const pulled = api.sub('pull', { subscription, maxMessages: 5 }).then(
        () => ({ code: grpc.status.OK, details: '' }),
        (e: grpc.ServiceError) => ({ code: e.code, details: e.details }),
      );
      await new Promise((r) => setTimeout(r, 300));
      const signalled = Date.now();
      server.child.kill('SIGTERM');
      const status = await pulled;
      expect(status.code).toBe(grpc.status.UNAVAILABLE);
      expect(Date.now() - signalled).toBeLessThan(1_900); // cut after 2 s before
      await stopped(server);
      api.close();
    } finally {
      dir.remove();
    }
  }, 30_000);

  it("Google's client resumes on the restarted server and receives every message, each key in order", async () => {
    const dir = tempDir();
    const first = await serve(['--data-dir', dir.path]);
    const port = first.port;
    process.env.PUBSUB_EMULATOR_HOST = first.host;
    process.env.METADATA_SERVER_DETECTION = 'none';
    const pubsub = new PubSub({ projectId: 'p' });
    try {
      const [topic] = await pubsub.createTopic('restart');
      const [subscription] = await topic.createSubscription('restart', { enableMessageOrdering: true, ackDeadlineSeconds: 10 });
      topic.setPublishOptions({ messageOrdering: true });
      const keys = ['a', 'b', 'c'];
      const perKey = 40;
      for (let i = 0; i < perKey; i++)
        await Promise.all(keys.map((k) => topic.publishMessage({ data: Buffer.from(String(i)), orderingKey: k })));
      const seen = new Map<string, number[]>(keys.map((k) => [k, []]));
      const acked = new Set<string>();
      const statuses: grpc.status[] = [];
      subscription.setOptions({ flowControl: { maxMessages: 5, allowExcessMessages: false } });
      subscription.on('debug', (d: { message: string }) => {
        const m = /ended with status (\d+)/.exec(d.message);
        if (m) statuses.push(Number(m[1]));
      });
      subscription.on('error', () => undefined);
      subscription.on('message', (m: Message) => {
        seen.get(m.orderingKey ?? '')!.push(Number(m.data.toString()));
        setTimeout(() => {
          m.ack();
          acked.add(`${m.orderingKey}${m.data.toString()}`);
        }, 30);
      });
      await waitFor('some messages before the stop', () => acked.size >= 10);
      first.child.kill('SIGTERM');
      await stopped(first);
      // How the streams ended when the server went (later ones are reconnects refused while it is down).
      const atStop = [...statuses];
      const second = await serve(['--port', String(port), '--data-dir', dir.path]);
      expect(second.port).toBe(port);
      await waitFor('every message acked', () => acked.size === keys.length * perKey, 60_000);
      await subscription.close();
      expect(atStop.length).toBeGreaterThan(0);
      expect(atStop.every((s) => s === grpc.status.UNAVAILABLE)).toBe(true);
      for (const k of keys) {
        const got = seen.get(k)!;
        // Each message follows the one before it, or starts a redelivery from an earlier one.
        got.forEach((n, i) => expect(i === 0 ? n === 0 : n === got[i - 1]! + 1 || n <= got[i - 1]!).toBe(true));
        expect(new Set(got).size).toBe(perKey);
      }
    } finally {
      await pubsub.close();
      for (const s of running.splice(0)) await s.stop();
      dir.remove();
    }
  }, 90_000);
});
