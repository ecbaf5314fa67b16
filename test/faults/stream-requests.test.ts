import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { servePerFile } from '../helpers/serve-process.js';
import { waitFor } from '../helpers/wait-for.js';

const T = 'projects/stream-faults/topics';
const S = 'projects/stream-faults/subscriptions';

const { server, api } = servePerFile();

/** A StreamingPull stream: its received messages as they come, and how it ended. */
function openStream(subscription: string) {
  const stream = api.subscriber.streamingPull() as grpc.ClientDuplexStream<any, any>;
  const received: { ackId: string; data: string }[] = [];
  const ended = new Promise<grpc.StatusObject>((resolve) => {
    stream.on('error', (e: grpc.ServiceError) => resolve(e));
    stream.on('status', (s: grpc.StatusObject) => resolve(s));
  });
  stream.on('data', (r: { receivedMessages: { ackId: string; message: { data: Buffer } }[] }) => {
    for (const m of r.receivedMessages) received.push({ ackId: m.ackId, data: m.message.data.toString() });
  });
  stream.write({ subscription, streamAckDeadlineSeconds: 10 });
  return { stream, received, ended };
}

async function publish(topic: string, text: string): Promise<void> {
  await api.pub('publish', { topic, messages: [{ data: Buffer.from(text) }] });
}

describe('one bad StreamingPull request ends that stream only (issue #9.1)', () => {
  it.each([601, -1])(
    'a stream modack of %i seconds: INVALID_ARGUMENT on that stream; other streams and calls keep working',
    async (seconds) => {
      const topic = `${T}/modack${seconds < 0 ? 'neg' : seconds}`;
      const subscription = `${S}/modack${seconds < 0 ? 'neg' : seconds}`;
      await api.pub('createTopic', { name: topic });
      await api.sub('createSubscription', { name: subscription, topic });
      const bad = openStream(subscription);
      await publish(topic, 'first');
      await waitFor('the first message on the stream', () => bad.received.length === 1);
      const good = openStream(subscription);
      bad.stream.write({ modifyDeadlineAckIds: [bad.received[0]!.ackId], modifyDeadlineSeconds: [seconds] });
      const status = await bad.ended;
      expect(status.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(status.details).toMatch(/between 0 and 600/);
      // The server is alive: the other stream still gets messages, and unary calls answer.
      await publish(topic, 'second');
      await waitFor('the second message on the other stream', () => good.received.some((m) => m.data === 'second'));
      expect(server.alive()).toBe(true);
      good.stream.end();
      expect((await good.ended).code).toBe(grpc.status.OK);
    },
  );

  it('an ack on a stream whose subscription was deleted: NOT_FOUND on that stream; the server keeps serving', async () => {
    const topic = `${T}/deleted`;
    const subscription = `${S}/deleted`;
    await api.pub('createTopic', { name: topic });
    await api.sub('createSubscription', { name: subscription, topic });
    const s = openStream(subscription);
    await publish(topic, 'one');
    await waitFor('the message on the stream', () => s.received.length === 1);
    await api.sub('deleteSubscription', { subscription });
    s.stream.write({ ackIds: [s.received[0]!.ackId] });
    const status = await s.ended;
    expect(status.code).toBe(grpc.status.NOT_FOUND);
    expect(status.details).toContain(subscription);
    expect(server.alive()).toBe(true);
    expect((await api.pub('publish', { topic, messages: [{ data: Buffer.from('after') }] })).messageIds).toHaveLength(1);
  });

  it('mismatched modify lists and an out-of-range stream deadline are INVALID_ARGUMENT, not a crash', async () => {
    const topic = `${T}/lists`;
    const subscription = `${S}/lists`;
    await api.pub('createTopic', { name: topic });
    await api.sub('createSubscription', { name: subscription, topic });
    const lists = openStream(subscription);
    lists.stream.write({ modifyDeadlineAckIds: ['a', 'b'], modifyDeadlineSeconds: [10] });
    expect((await lists.ended).code).toBe(grpc.status.INVALID_ARGUMENT);
    const stream = api.subscriber.streamingPull() as grpc.ClientDuplexStream<any, any>;
    const ended = new Promise<grpc.StatusObject>((resolve) => stream.on('error', resolve));
    stream.write({ subscription, streamAckDeadlineSeconds: 100_000 });
    expect((await ended).code).toBe(grpc.status.INVALID_ARGUMENT);
    const missing = openStream(`${S}/never-created`);
    expect((await missing.ended).code).toBe(grpc.status.NOT_FOUND);
    expect(server.alive()).toBe(true);
    await publish(topic, 'still here');
  });
});
