import * as grpc from '@grpc/grpc-js';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { receivedToProto } from '../../src/api/proto-mapping.js';
import { loadPubsubProto } from '../../src/api/pubsub-proto.js';
import { encodeDeliveries } from '../../src/api/streaming-pull-response.js';
import type { StoredDelivery } from '../../src/core/consumer.js';
import { toPubsubMessage } from '../../src/core/subscription-runtime.js';
import type { StoredMessage } from '../../src/store/store.js';
import { servePerFile } from '../helpers/serve-process.js';
import { waitFor } from '../helpers/wait-for.js';

/**
 * grpc-js's own (proto-loader) coding of StreamingPull, as Google's clients and the lean bench client decode
 * it, of the deliveries as Pull hands them out (toPubsubMessage).
 */
const method = (loadPubsubProto() as unknown as { google: { pubsub: { v1: { Subscriber: grpc.ServiceClientConstructor } } } }).google.pubsub
  .v1.Subscriber.service.StreamingPull!;
const decode = (bytes: Buffer) => method.responseDeserialize(bytes) as Record<string, unknown>;
const viaProtoLoader = (batch: StoredDelivery[], exactlyOnce: boolean, ordering: boolean) =>
  method.responseSerialize({
    receivedMessages: batch.map((r) =>
      receivedToProto({ ackId: r.ackId, message: toPubsubMessage(r.message), deliveryAttempt: r.deliveryAttempt }),
    ),
    subscriptionProperties: { exactlyOnceDeliveryEnabled: exactlyOnce, messageOrderingEnabled: ordering },
  });

const text = fc.string({ unit: 'binary', maxLength: 80 });
const received: fc.Arbitrary<StoredDelivery> = fc.record({
  ackId: fc.string({ minLength: 1, maxLength: 100 }),
  deliveryAttempt: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 2 ** 31 - 1 })),
  message: fc.record({
    seq: fc.oneof(fc.integer({ min: 1, max: 2 ** 31 }), fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER })),
    topicUid: fc.nat(),
    publishTime: fc.integer({ min: 0, max: 2 ** 45 }),
    data: fc.uint8Array({ maxLength: 300 }).map((a) => Buffer.from(a)),
    attributes: fc.dictionary(text, text, { maxKeys: 4 }),
    orderingKey: text,
    keySeq: fc.nat(),
  }),
  size: fc.nat(),
});

/** A stored message with what a test does not care about filled in. */
const stored = (m: Partial<StoredMessage> & Pick<StoredMessage, 'seq' | 'publishTime' | 'data'>): StoredMessage => ({
  topicUid: 1,
  attributes: {},
  orderingKey: '',
  keySeq: 1,
  ...m,
});

describe('StreamingPullResponse encoding', () => {
  it('decodes (through proto-loader) to what the proto-loader encoding of the same deliveries decodes to', () => {
    fc.assert(
      fc.property(fc.array(received, { maxLength: 20 }), fc.boolean(), fc.boolean(), (batch, exactlyOnce, ordering) => {
        const ours = decode(encodeDeliveries(batch, { exactlyOnce, ordering }));
        expect(ours).toEqual(decode(viaProtoLoader(batch, exactlyOnce, ordering)));
        expect(ours.receivedMessages).toHaveLength(batch.length);
      }),
      { numRuns: 300 },
    );
  });

  it('carries a 1 MB payload and multi-byte text intact', () => {
    const data = Buffer.alloc(1024 * 1024, 7);
    const batch: StoredDelivery[] = [
      {
        ackId: 'a-1',
        deliveryAttempt: 3,
        message: stored({ seq: 42, publishTime: 1_700_000_000_123, data, attributes: { ключ: 'värde 🙂' }, orderingKey: '键' }),
        size: data.byteLength,
      },
    ];
    const [r] = decode(encodeDeliveries(batch, { exactlyOnce: false, ordering: true })).receivedMessages as {
      ackId: string;
      deliveryAttempt: number;
      message: {
        data: Buffer;
        attributes: Record<string, string>;
        orderingKey: string;
        messageId: string;
        publishTime: { seconds: string; nanos: number };
      };
    }[];
    expect(r!.message.data.equals(data)).toBe(true);
    expect(r!.message.messageId).toBe('42');
    expect(r!.message.attributes).toEqual({ ключ: 'värde 🙂' });
    expect(r!.message.orderingKey).toBe('键');
    expect(r!.message.publishTime).toEqual({ seconds: '1700000000', nanos: 123_000_000 });
    expect(r!.deliveryAttempt).toBe(3);
  });

  it('writes varints on both sides of 31 bits (where the encoder switches from shifts to division) as proto-loader does', () => {
    const batch: StoredDelivery[] = [2 ** 31 - 1, 2 ** 31, 2 ** 32 + 1, 2 ** 14 - 1, 2 ** 14].map((seconds, i) => ({
      ackId: `a-${i}`,
      deliveryAttempt: 2 ** 31 - 1,
      message: stored({
        seq: i + 1,
        publishTime: seconds * 1000 + 999,
        data: Buffer.alloc(2 ** 14 + i, i),
        orderingKey: 'k',
        keySeq: i + 1,
      }),
      size: 2 ** 14 + i + 1,
    }));
    expect(decode(encodeDeliveries(batch, { exactlyOnce: false, ordering: true }))).toEqual(decode(viaProtoLoader(batch, false, true)));
  });

  it('writes a time before 1970 as Timestamp defines it: negative seconds (ten bytes on the wire), nanos from 0 up', () => {
    const message = stored({ seq: 1, publishTime: -1, data: Buffer.alloc(0) });
    const [r] = decode(encodeDeliveries([{ ackId: 'a', deliveryAttempt: 0, message, size: 0 }], { exactlyOnce: false, ordering: false }))
      .receivedMessages as { message: { publishTime: unknown } }[];
    expect(r!.message.publishTime).toEqual({ seconds: '-1', nanos: 999_000_000 });
  });
});

describe('StreamingPull responses from `orderly serve`', () => {
  const { api } = servePerFile();

  it('a delivery of 600 messages of one key comes in responses of at most 250, in key order, each acked on the stream once', async () => {
    const topic = 'projects/chunks/topics/one-key';
    const subscription = 'projects/chunks/subscriptions/one-key';
    await api.pub('createTopic', { name: topic });
    await api.sub('createSubscription', { name: subscription, topic, enableMessageOrdering: true });
    const messages = Array.from({ length: 600 }, (_, i) => ({ data: Buffer.from(String(i)), orderingKey: 'k' }));
    await api.pub('publish', { topic, messages });

    const stream = api.subscriber.streamingPull() as grpc.ClientDuplexStream<Record<string, unknown>, any>;
    const sizes: number[] = [];
    const received: string[] = [];
    const ended = new Promise<grpc.StatusObject>((resolve, reject) => {
      stream.on('status', resolve);
      stream.on('error', reject);
    });
    stream.on('data', (r: { receivedMessages: { ackId: string; message: { data: Buffer } }[]; subscriptionProperties: unknown }) => {
      sizes.push(r.receivedMessages.length);
      expect(r.subscriptionProperties).toEqual({ messageOrderingEnabled: true, exactlyOnceDeliveryEnabled: false });
      for (const m of r.receivedMessages) received.push(m.message.data.toString());
      stream.write({ ackIds: r.receivedMessages.map((m) => m.ackId) });
      if (received.length >= 600) stream.end();
    });
    stream.write({ subscription, streamAckDeadlineSeconds: 60, maxOutstandingMessages: 1000 });
    expect((await ended).code).toBe(0);
    expect(received).toEqual(messages.map((m) => m.data.toString()));
    expect(Math.max(...sizes)).toBeLessThanOrEqual(250);
    expect(sizes.length).toBeGreaterThanOrEqual(3);
  });

  it('maxOutstandingBytes holds deliveries back until acks free their bytes', async () => {
    const topic = 'projects/chunks/topics/bytes';
    const subscription = 'projects/chunks/subscriptions/bytes';
    await api.pub('createTopic', { name: topic });
    await api.sub('createSubscription', { name: subscription, topic });
    await api.pub('publish', { topic, messages: Array.from({ length: 5 }, (_, i) => ({ data: Buffer.from(`m${i}`) })) });

    const stream = api.subscriber.streamingPull() as grpc.ClientDuplexStream<Record<string, unknown>, any>;
    const received: { ackId: string; data: string }[] = [];
    stream.on('data', (r: { receivedMessages: { ackId: string; message: { data: Buffer } }[] }) => {
      for (const m of r.receivedMessages) received.push({ ackId: m.ackId, data: m.message.data.toString() });
    });
    const ended = new Promise<grpc.StatusObject>((resolve) => stream.on('status', resolve));
    stream.on('error', () => undefined);
    // One byte: a message goes out while nothing is outstanding, the next only once it is acked.
    stream.write({ subscription, streamAckDeadlineSeconds: 60, maxOutstandingBytes: 1 });
    for (let acked = 0; acked < 5; acked++) {
      await waitFor(`message ${acked + 1} on the stream`, () => received.length > acked);
      await new Promise((r) => setTimeout(r, 300));
      expect(received).toHaveLength(acked + 1);
      stream.write({ ackIds: [received[acked]!.ackId] });
    }
    stream.end();
    expect((await ended).code).toBe(0);
    expect(received.map((m) => m.data).sort()).toEqual(['m0', 'm1', 'm2', 'm3', 'm4']);
  });

  it('Pull and StreamingPull are refused on push and export subscriptions, whose messages go to their endpoint or sink', async () => {
    const topic = 'projects/chunks/topics/not-pulled';
    await api.pub('createTopic', { name: topic });
    const kinds: [string, Record<string, unknown>][] = [
      ['push', { pushConfig: { pushEndpoint: 'http://127.0.0.1:9/push' } }],
      ['Cloud Storage', { cloudStorageConfig: { bucket: 'never-pulled' } }],
    ];
    for (const [kind, config] of kinds) {
      const subscription = `projects/chunks/subscriptions/not-pulled-${kind.replace(' ', '-').toLowerCase()}`;
      await api.sub('createSubscription', { name: subscription, topic, ...config });
      const refusal = {
        code: grpc.status.FAILED_PRECONDITION,
        details: expect.stringContaining(`This method is not supported for ${kind} subscriptions`),
      };
      await expect(api.sub('pull', { subscription, maxMessages: 10 })).rejects.toMatchObject(refusal);
      const stream = api.subscriber.streamingPull() as grpc.ClientDuplexStream<Record<string, unknown>, any>;
      const failed = new Promise<grpc.ServiceError>((resolve) => stream.on('error', resolve));
      stream.write({ subscription, streamAckDeadlineSeconds: 60 });
      expect(await failed).toMatchObject(refusal);
    }
    // A stream open when its subscription becomes a push subscription ends the same way.
    const subscription = 'projects/chunks/subscriptions/not-pulled-later';
    await api.sub('createSubscription', { name: subscription, topic });
    const stream = api.subscriber.streamingPull() as grpc.ClientDuplexStream<Record<string, unknown>, any>;
    const failed = new Promise<grpc.ServiceError>((resolve) => stream.on('error', resolve));
    let delivered = false;
    stream.on('data', () => (delivered = true));
    stream.write({ subscription, streamAckDeadlineSeconds: 60 });
    await api.pub('publish', { topic, messages: [{ data: Buffer.from('x') }] });
    // Made push once the stream delivers (a fixed 200 ms could pass before the stream was attached: its first
    // request was then refused as the push subscription's, and the open stream's ending went untested).
    await waitFor('the message on the open stream', () => delivered);
    await api.sub('modifyPushConfig', { subscription, pushConfig: { pushEndpoint: 'http://127.0.0.1:9/push' } });
    expect(await failed).toMatchObject({
      code: grpc.status.FAILED_PRECONDITION,
      details: expect.stringContaining('This method is not supported for push subscriptions'),
    });
  });
});
