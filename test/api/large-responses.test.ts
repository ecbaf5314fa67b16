import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/wait-for.js';
import { rawPubsubClients, servePerFile } from '../helpers/serve-process.js';

const { server, api } = servePerFile();

/** What Google's Java and Go subscribers accept in one response (their gRPC max inbound message size). */
const CLIENT_MAX_RECEIVE = 20 * 1024 * 1024;
const MB = 1_000_000;

async function bigBacklog(id: string, ordered: boolean, count: number): Promise<string> {
  const topic = `projects/big/topics/${id}`;
  const subscription = `projects/big/subscriptions/${id}`;
  await api.pub('createTopic', { name: topic });
  await api.sub('createSubscription', { name: subscription, topic, enableMessageOrdering: ordered, ackDeadlineSeconds: 60 });
  for (let i = 0; i < count; i++)
    await api.pub('publish', { topic, messages: [{ data: Buffer.alloc(MB, i % 256), orderingKey: ordered ? `k${i % 3}` : '' }] });
  return subscription;
}

describe('responses fit a client that accepts 20 MiB per message (Java, Go)', () => {
  it('StreamingPull splits a large delivery into several responses instead of one the client must refuse', async () => {
    const subscription = await bigBacklog('stream', true, 30);
    const client = rawPubsubClients(server.host, { 'grpc.max_receive_message_length': CLIENT_MAX_RECEIVE });
    try {
      const stream = client.subscriber.streamingPull() as grpc.ClientDuplexStream<any, any>;
      const received: { data: Buffer; orderingKey: string }[] = [];
      let failure: grpc.ServiceError | undefined;
      stream.on('data', (r: { receivedMessages: { message: { data: Buffer; orderingKey: string } }[] }) => {
        for (const m of r.receivedMessages) received.push(m.message);
      });
      stream.on('error', (e: grpc.ServiceError) => (failure = e));
      stream.write({ subscription, streamAckDeadlineSeconds: 60 });
      await waitFor('all 30 messages, or a failure', () => received.length === 30 || failure !== undefined);
      expect(failure?.details).toBeUndefined();
      for (const key of ['k0', 'k1', 'k2']) {
        const firsts = received.filter((m) => m.orderingKey === key).map((m) => m.data[0]);
        expect(firsts).toEqual([...firsts].sort((a, b) => a! - b!));
      }
      stream.cancel();
    } finally {
      client.close();
    }
  }, 60_000);

  it('Pull returns fewer messages rather than a response over 20 MiB, and the rest on later pulls', async () => {
    const subscription = await bigBacklog('pull', false, 30);
    const client = rawPubsubClients(server.host, { 'grpc.max_receive_message_length': CLIENT_MAX_RECEIVE });
    try {
      const seen = new Set<string>();
      for (let i = 0; i < 30 && seen.size < 30; i++) {
        const r = (await client.sub('pull', { subscription, maxMessages: 100 })) as {
          receivedMessages: { ackId: string; message: { messageId: string } }[];
        };
        expect(r.receivedMessages.length).toBeGreaterThan(0);
        for (const m of r.receivedMessages) seen.add(m.message.messageId);
        await client.sub('acknowledge', { subscription, ackIds: r.receivedMessages.map((m) => m.ackId) });
      }
      expect(seen.size).toBe(30);
    } finally {
      client.close();
    }
  }, 60_000);
});
