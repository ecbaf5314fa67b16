import { PubSub, type Message } from '@google-cloud/pubsub';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/wait-for.js';
import { servePerFile } from '../helpers/serve-process.js';

const { server, api } = servePerFile();
let pubsub: PubSub;

beforeAll(() => {
  process.env.PUBSUB_EMULATOR_HOST = server.host;
  process.env.METADATA_SERVER_DETECTION = 'none';
  pubsub = new PubSub({ projectId: 'flow' });
});
afterAll(async () => {
  await pubsub?.close();
});

async function backlog(id: string, count: number): Promise<string> {
  const topic = `projects/flow/topics/${id}`;
  const subscription = `projects/flow/subscriptions/${id}`;
  await api.pub('createTopic', { name: topic });
  await api.sub('createSubscription', { name: subscription, topic, ackDeadlineSeconds: 60 });
  for (let i = 0; i < count; i += 500)
    await api.pub('publish', { topic, messages: Array.from({ length: 500 }, (_, j) => ({ data: Buffer.from(String(i + j)) })) });
  return subscription;
}

describe('StreamingPull max_outstanding_messages <= 0: no limit, as the proto says', () => {
  it('a raw stream asking for no limit receives more than 1000 unacked messages', async () => {
    const subscription = await backlog('raw', 1500);
    const stream = api.subscriber.streamingPull() as grpc.ClientDuplexStream<any, any>;
    let received = 0;
    stream.on('data', (r: { receivedMessages: unknown[] }) => (received += r.receivedMessages.length));
    stream.on('error', () => undefined);
    stream.write({ subscription, streamAckDeadlineSeconds: 60, maxOutstandingMessages: 0 });
    await waitFor('1500 messages on the stream', () => received === 1500, 10_000).catch(() => undefined);
    stream.cancel();
    expect(received).toBe(1500);
  }, 30_000);

  it("Google's client with useLegacyFlowControl (it sends 0 and limits itself) gets its 1500 messages on one stream", async () => {
    await backlog('legacy', 1500);
    const subscription = pubsub.subscription('legacy', {
      flowControl: { maxMessages: 1500, allowExcessMessages: false },
      streamingOptions: { maxStreams: 1 },
      useLegacyFlowControl: true,
    });
    // A batch handler: it acks only once it has the whole batch of 1500.
    const held: Message[] = [];
    subscription.on('message', (m: Message) => held.push(m));
    subscription.on('error', () => undefined);
    await waitFor('1500 messages held at once', () => held.length === 1500, 10_000).catch(() => undefined);
    expect(held.length).toBe(1500);
    for (const m of held) m.ack();
    await subscription.close();
  }, 30_000);
});
