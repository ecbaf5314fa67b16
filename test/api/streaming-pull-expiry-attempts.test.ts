import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/wait-for.js';
import { servePerFile } from '../helpers/serve-process.js';

const { api } = servePerFile();

/**
 * The proto's ReceivedMessage.delivery_attempt: "1 + (number of NACKs) + (number of ack_deadline exceeds)
 * for this message", an ack_deadline exceeds event being "whenever a message is not acknowledged within
 * ack_deadline".
 */
describe('delivery_attempt counts the deadline expiry of every message out, not only the first of its key', () => {
  it('a stream that stops settling (a crashed consumer): all of a key’s messages out expire, and each counts it', async () => {
    const deadLetterTopic = 'projects/attempts/topics/dead';
    const topic = 'projects/attempts/topics/orders';
    const subscription = 'projects/attempts/subscriptions/orders';
    await api.pub('createTopic', { name: deadLetterTopic });
    await api.pub('createTopic', { name: topic });
    await api.sub('createSubscription', {
      name: subscription,
      topic,
      enableMessageOrdering: true,
      ackDeadlineSeconds: 10,
      deadLetterPolicy: { deadLetterTopic, maxDeliveryAttempts: 5 },
      retryPolicy: { minimumBackoff: { seconds: 0 }, maximumBackoff: { seconds: 0 } },
    });
    await api.pub('publish', { topic, messages: ['1', '2', '3'].map((n) => ({ data: Buffer.from(n), orderingKey: 'k' })) });
    const stream = api.subscriber.streamingPull() as grpc.ClientDuplexStream<any, any>;
    const received: { data: string; attempt: number }[] = [];
    stream.on('data', (r: { receivedMessages: { message: { data: Buffer }; deliveryAttempt: number }[] }) => {
      for (const m of r.receivedMessages) received.push({ data: m.message.data.toString(), attempt: m.deliveryAttempt });
    });
    stream.on('error', () => undefined);
    // Nothing is acked: after 10 s every lease has run out, and the key comes again from its first message.
    stream.write({ subscription, streamAckDeadlineSeconds: 10 });
    await waitFor('the key delivered twice', () => received.length >= 6, 25_000);
    stream.cancel();
    expect(received.slice(0, 3)).toEqual([
      { data: '1', attempt: 1 },
      { data: '2', attempt: 1 },
      { data: '3', attempt: 1 },
    ]);
    expect(received.slice(3, 6)).toEqual([
      { data: '1', attempt: 2 },
      { data: '2', attempt: 2 },
      { data: '3', attempt: 2 },
    ]);
  }, 40_000);
});
