import { describe, expect, it } from 'vitest';
import { subscriptionFromProto, subscriptionToProto } from '../../src/api/proto-mapping.js';
import { fromProtoJson, toProtoJson } from '../../src/api/proto-json.js';
import type { ProtoSubscription, PublisherRequests } from '../../src/api/pubsub-messages.js';
import { pubsubRoot } from '../../src/api/pubsub-proto.js';
import { normalizeSubscription } from '../../src/core/subscription-config.js';

/** Proto3 JSON from the descriptors (REST's half of the one mapping), and the mapping's round trips. */
const type = (name: string) => pubsubRoot().lookupType(name);
const Subscription = type('google.pubsub.v1.Subscription');
const decode = (name: string, json: unknown) => fromProtoJson(type(name), json);
const decodeSubscription = (json: unknown) => fromProtoJson(Subscription, json) as ProtoSubscription;
const error = (fn: () => unknown) => {
  try {
    fn();
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error('expected an error');
};

describe('proto3 JSON decoding', () => {
  it('gives the shape gRPC gives: defaults filled, int64 as strings, Durations and Timestamps as messages, bytes as Buffers', () => {
    const sub = decode('google.pubsub.v1.Subscription', {
      name: 'n',
      topic: 't',
      ack_deadline_seconds: '20',
      messageRetentionDuration: '1.5s',
      labels: { a: 'b' },
    });
    expect(sub).toMatchObject({
      name: 'n',
      topic: 't',
      ackDeadlineSeconds: 20,
      messageRetentionDuration: { seconds: '1', nanos: 500_000_000 },
      labels: { a: 'b' },
      filter: '',
      pushConfig: null,
    });
    const seek = decode('google.pubsub.v1.SeekRequest', { subscription: 's', time: '2024-05-01T12:00:00.25+02:00' });
    expect(seek).toMatchObject({ time: { seconds: String(Date.UTC(2024, 4, 1, 10) / 1000), nanos: 250_000_000 }, target: 'time' });
    const publish = decode('google.pubsub.v1.PublishRequest', {
      topic: 't',
      messages: [{ data: 'AAEC_w', attributes: { k: 'v' } }],
    }) as PublisherRequests['Publish'];
    expect(Buffer.from(publish.messages[0]!.data)).toEqual(Buffer.from([0, 1, 2, 255]));
    expect(decode('google.pubsub.v1.UpdateTopicRequest', { updateMask: 'messageRetentionDuration,labels' }).updateMask).toEqual({
      paths: ['message_retention_duration', 'labels'],
    });
    expect(decode('google.pubsub.v1.ValidateMessageRequest', { parent: 'p', encoding: 2 }).encoding).toBe('BINARY');
  });

  it('refuses what proto3 JSON does not allow, naming the field', () => {
    const sub = (json: unknown) => error(() => decode('google.pubsub.v1.Subscription', json));
    expect(sub({ colour: 'red' })).toBe('colour: unknown field');
    expect(sub({ retryPolicy: { minimumBackoff: '1s', later: 1 } })).toBe('retryPolicy.later: unknown field');
    expect(sub({ ackDeadlineSeconds: 1.5 })).toBe('ackDeadlineSeconds: must be an integer (a number or a decimal string)');
    expect(sub({ ackDeadlineSeconds: 2 ** 31 })).toBe('ackDeadlineSeconds: is out of the int32 range');
    expect(sub({ ackDeadlineSeconds: 10, ack_deadline_seconds: 10 })).toBe(
      'ack_deadline_seconds: is given twice (also as ackDeadlineSeconds)',
    );
    expect(sub({ messageRetentionDuration: 600 })).toBe('messageRetentionDuration: must be a duration string like "600s"');
    expect(sub({ labels: { a: 1 } })).toBe('labels.a: must be a string');
    expect(sub({ enableMessageOrdering: 'yes' })).toBe('enableMessageOrdering: must be true or false');
    expect(sub({ pushConfig: [] })).toBe('pushConfig: must be a JSON object');
    expect(sub({ __proto__: 1, toString: 'x' })).toMatch(/^(__proto__|toString): unknown field$/);
    expect(error(() => decode('google.pubsub.v1.SeekRequest', { time: '2024-05-01T12:00:00Z', snapshot: 's' }))).toBe(
      'snapshot: only one of time, snapshot may be set (time is set too)',
    );
    expect(error(() => decode('google.pubsub.v1.SeekRequest', { time: '0000-01-01T00:00:00Z' }))).toMatch(
      /^time: must be an RFC 3339 timestamp/,
    );
    expect(error(() => decode('google.pubsub.v1.PublishRequest', { messages: [{ data: 'not base64!' }] }))).toBe(
      'messages[0].data: must be a base64 string',
    );
    expect(error(() => decode('google.pubsub.v1.ValidateMessageRequest', { encoding: 'XML' }))).toBe(
      'encoding: must be one of ENCODING_UNSPECIFIED, JSON, BINARY, got "XML"',
    );
    expect(error(() => decode('google.pubsub.v1.PublishRequest', []))).toBe('request body: must be a JSON object');
  });
});

describe('proto3 JSON encoding (what REST answers)', () => {
  it("leaves defaults out, writes Durations, Timestamps, int64, bytes and FieldMasks as Google's JSON does", () => {
    const json = toProtoJson(type('google.pubsub.v1.ReceivedMessage'), {
      ackId: 'a',
      deliveryAttempt: 0,
      message: {
        data: Buffer.from('hi'),
        attributes: {},
        messageId: '7',
        publishTime: { seconds: '1714564800', nanos: 5_000_000 },
        orderingKey: '',
      },
    });
    expect(json).toEqual({ ackId: 'a', message: { data: 'aGk=', messageId: '7', publishTime: '2024-05-01T12:00:00.005Z' } });
    expect(
      toProtoJson(type('google.pubsub.v1.RetryPolicy'), {
        minimumBackoff: { seconds: '1', nanos: 500_000 },
        maximumBackoff: { seconds: '600', nanos: 0 },
      }),
    ).toEqual({
      minimumBackoff: '1.000500s',
      maximumBackoff: '600s',
    });
    expect(toProtoJson(type('google.pubsub.v1.UpdateTopicRequest'), { updateMask: { paths: ['message_retention_duration'] } })).toEqual({
      updateMask: 'messageRetentionDuration',
    });
    expect(toProtoJson(type('google.pubsub.v1.CloudStorageConfig'), { bucket: 'b', maxBytes: '1000', textConfig: {} })).toEqual({
      bucket: 'b',
      maxBytes: '1000',
      textConfig: {},
    });
    // A string field whose value is "0" is not at its default (only an int64's "0" is).
    expect(
      toProtoJson(type('google.pubsub.v1.PushConfig'), {
        pushEndpoint: 'http://127.0.0.1:9/push',
        oidcToken: { serviceAccountEmail: 'sa@p.iam.gserviceaccount.com', audience: '0' },
      }),
    ).toEqual({
      pushEndpoint: 'http://127.0.0.1:9/push',
      oidcToken: { serviceAccountEmail: 'sa@p.iam.gserviceaccount.com', audience: '0' },
    });
    expect(toProtoJson(type('google.pubsub.v1.CloudStorageConfig'), { bucket: 'b', maxBytes: '0' })).toEqual({ bucket: 'b' });
  });
});

describe('the mapping round trip', () => {
  it("every accepted subscription field comes back: export service accounts, push settings, Orderly's extensions", () => {
    const json = {
      name: 'projects/p/subscriptions/s',
      topic: 'projects/p/topics/t',
      bigqueryConfig: {
        table: 'p.d.t',
        useTopicSchema: true,
        writeMetadata: true,
        dropUnknownFields: true,
        serviceAccountEmail: 'bq@p.iam.gserviceaccount.com',
      },
      ackDeadlineSeconds: 30,
      labels: { a: 'b' },
      retryPolicy: { minimumBackoff: '5s', maximumBackoff: '60s' },
    };
    const stored = normalizeSubscription(subscriptionFromProto(decodeSubscription(json)), (t) => t);
    const answered = toProtoJson(Subscription, subscriptionToProto({ name: json.name, ...stored, state: 'ACTIVE', detached: false }));
    expect(answered).toEqual({
      ...json,
      pushConfig: {},
      messageRetentionDuration: '604800s',
      state: 'ACTIVE',
      bigqueryConfig: { ...json.bigqueryConfig, state: 'ACTIVE' },
    });

    const storage = {
      name: 'projects/p/subscriptions/s',
      topic: 'projects/p/topics/t',
      cloudStorageConfig: {
        bucket: 'b',
        filenamePrefix: 'x/',
        avroConfig: { writeMetadata: true, useTopicSchema: true },
        maxDuration: '120s',
        maxBytes: '2000',
        serviceAccountEmail: 'gcs@p.iam.gserviceaccount.com',
      },
    };
    const storedStorage = normalizeSubscription(subscriptionFromProto(decodeSubscription(storage)), (t) => t);
    expect(
      toProtoJson(Subscription, subscriptionToProto({ name: storage.name, ...storedStorage, state: 'ACTIVE', detached: false }))
        .cloudStorageConfig,
    ).toEqual({ ...storage.cloudStorageConfig, state: 'ACTIVE' });

    const parquet = { topic: 't', cloudStorageConfig: { bucket: 'b', parquetConfig: { compression: 'GZIP' }, shards: 4 } };
    const storedParquet = normalizeSubscription(subscriptionFromProto(decodeSubscription(parquet)), (t) => t);
    expect(storedParquet.cloudStorageConfig).toEqual({ bucket: 'b', parquetConfig: { compression: 'GZIP' }, shards: 4 });
    expect(
      toProtoJson(Subscription, subscriptionToProto({ name: 'n', ...storedParquet, state: 'ACTIVE', detached: false })).cloudStorageConfig,
    ).toEqual({ bucket: 'b', parquetConfig: { compression: 'GZIP' }, shards: 4, state: 'ACTIVE' });

    // A job file's duration in minutes is answered in seconds, as the export reads it (not "5s").
    const fromJobFile = { ...storedParquet, cloudStorageConfig: { bucket: 'b', maxDuration: '5m' } };
    expect(
      toProtoJson(Subscription, subscriptionToProto({ name: 'n', ...fromJobFile, state: 'ACTIVE', detached: false })).cloudStorageConfig,
    ).toMatchObject({ maxDuration: '300s' });
  });
});
