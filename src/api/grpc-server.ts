import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { ExportManager } from '../connector/export-manager.js';
import { OrderlyError, type StatusCode } from '../core/errors.js';
import type { MessageInput, ReceivedMessage } from '../core/message.js';
import type { PubSubCore } from '../core/pubsub-core.js';
import type { Consumer } from '../core/subscription-runtime.js';
import { receivedToProto, subscriptionFromProto, subscriptionToProto, timestampMs, topicToProto, type ProtoDuration } from './proto-mapping.js';

const GRPC_CODES: Record<StatusCode, grpc.status> = {
  INVALID_ARGUMENT: grpc.status.INVALID_ARGUMENT,
  NOT_FOUND: grpc.status.NOT_FOUND,
  ALREADY_EXISTS: grpc.status.ALREADY_EXISTS,
  FAILED_PRECONDITION: grpc.status.FAILED_PRECONDITION,
  RESOURCE_EXHAUSTED: grpc.status.RESOURCE_EXHAUSTED,
  INTERNAL: grpc.status.INTERNAL,
};

/** Google's pubsub.proto, loaded from the protos shipped in @google-cloud/pubsub (not copied here). */
export function loadPubsubProto(): grpc.GrpcObject {
  const require = createRequire(import.meta.url);
  const pubsubPackage = require.resolve('@google-cloud/pubsub/package.json');
  // google/api/*.proto (annotations, field behaviour) ship in google-gax, a dependency of the client.
  const gaxMain = createRequire(pubsubPackage).resolve('google-gax');
  const gaxPackage = join(gaxMain.slice(0, gaxMain.lastIndexOf('/node_modules/google-gax/') + '/node_modules/google-gax/'.length), 'package.json');
  const definition = protoLoader.loadSync('google/pubsub/v1/pubsub.proto', {
    includeDirs: [join(dirname(pubsubPackage), 'build', 'protos'), join(dirname(gaxPackage), 'build', 'protos')],
    keepCase: false,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  return grpc.loadPackageDefinition(definition);
}

type Handler = (request: any) => Promise<unknown>;

/** Unary handlers turn OrderlyErrors into Pub/Sub's status codes. */
function unary(fn: Handler): grpc.handleUnaryCall<any, any> {
  return (call, callback) => {
    fn(call.request).then(
      (result) => callback(null, result ?? {}),
      (e: unknown) => callback(toStatus(e)),
    );
  };
}

function toStatus(e: unknown): Partial<grpc.ServiceError> {
  if (e instanceof OrderlyError) return { code: GRPC_CODES[e.code], details: e.message };
  return { code: grpc.status.INTERNAL, details: (e as Error).message ?? String(e) };
}

/**
 * google.pubsub.v1 Publisher and Subscriber over the core, for Google's client libraries via
 * PUBSUB_EMULATOR_HOST. StreamingPull: each stream is one consumer (a key with outstanding messages
 * stays on its stream); acks and modacks may come on the stream or as unary calls, and ack ids stay
 * valid after their stream ended.
 */
export function pubsubServices(core: PubSubCore, exports?: ExportManager): { server: grpc.Server } {
  const proto = loadPubsubProto() as any;
  const v1 = proto.google.pubsub.v1;
  const server = new grpc.Server({ 'grpc.max_receive_message_length': 20 * 1024 * 1024 });
  const syncExports = async () => {
    await exports?.sync();
  };
  const project = (p: string) => p.replace(/^projects\//, '');

  server.addService(v1.Publisher.service, {
    createTopic: unary(async (t) => topicToProto(await core.createTopic(t.name, { labels: t.labels }))),
    updateTopic: unary(async (r) => topicToProto(await core.updateTopic(r.topic.name, { labels: r.topic.labels }))),
    getTopic: unary(async (r) => topicToProto(core.getTopic(r.topic))),
    listTopics: unary(async (r) => ({ topics: core.listTopics(project(r.project)).map(topicToProto), nextPageToken: '' })),
    listTopicSubscriptions: unary(async (r) => ({ subscriptions: core.listTopicSubscriptions(r.topic), nextPageToken: '' })),
    listTopicSnapshots: unary(async () => ({ snapshots: [], nextPageToken: '' })),
    deleteTopic: unary(async (r) => core.deleteTopic(r.topic)),
    detachSubscription: unary(async (r) => {
      await core.deleteSubscription(r.subscription);
      await syncExports();
    }),
    publish: unary(async (r) => {
      const keys = new Set((r.messages as { orderingKey?: string }[]).map((m) => m.orderingKey ?? ''));
      if (keys.size > 1) throw new OrderlyError('INVALID_ARGUMENT', 'messages: all messages of one publish request must share an ordering key');
      const messages: MessageInput[] = r.messages.map((m: any) => ({ data: m.data, attributes: m.attributes, orderingKey: m.orderingKey }));
      return { messageIds: await core.publish(r.topic, messages) };
    }),
  });

  server.addService(v1.Subscriber.service, {
    createSubscription: unary(async (s) => {
      const created = await core.createSubscription(s.name, subscriptionFromProto(s));
      try {
        await syncExports();
      } catch (e) {
        await core.deleteSubscription(created.name);
        throw e;
      }
      return subscriptionToProto(core.getSubscription(created.name));
    }),
    getSubscription: unary(async (r) => subscriptionToProto(core.getSubscription(r.subscription))),
    updateSubscription: unary(async (r) => {
      const full = subscriptionFromProto(r.subscription) as unknown as Record<string, unknown>;
      const patch: Record<string, unknown> = {};
      for (const path of (r.updateMask?.paths ?? []) as string[]) {
        const field = path.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
        patch[field] = full[field] ?? null;
      }
      const updated = await core.updateSubscription(r.subscription.name, patch);
      await syncExports();
      return subscriptionToProto(updated);
    }),
    listSubscriptions: unary(async (r) => ({ subscriptions: core.listSubscriptions(project(r.project)).map(subscriptionToProto), nextPageToken: '' })),
    deleteSubscription: unary(async (r) => {
      await core.deleteSubscription(r.subscription);
      await syncExports();
    }),
    modifyAckDeadline: unary(async (r) => core.modifyAckDeadline(r.subscription, r.ackIds, r.ackDeadlineSeconds)),
    acknowledge: unary(async (r) => core.acknowledge(r.subscription, r.ackIds)),
    pull: unary(async (r) => {
      const messages = await core.pull(r.subscription, { maxMessages: r.maxMessages || 100, waitMs: r.returnImmediately ? 0 : 5_000 });
      return { receivedMessages: messages.map(receivedToProto) };
    }),
    modifyPushConfig: unary(async (r) => {
      await core.updateSubscription(r.subscription, { pushConfig: r.pushConfig?.pushEndpoint ? r.pushConfig : null });
    }),
    seek: unary(async (r) => {
      if (!r.time) throw new OrderlyError('INVALID_ARGUMENT', 'seek: only seek to a time is supported (snapshots are not)');
      await core.seek(r.subscription, timestampMs(r.time as ProtoDuration));
      return {};
    }),
    streamingPull: (call: grpc.ServerDuplexStream<any, any>) => streamingPull(core, call),
    getSnapshot: unimplemented('snapshots'),
    listSnapshots: unary(async () => ({ snapshots: [], nextPageToken: '' })),
    createSnapshot: unimplemented('snapshots'),
    updateSnapshot: unimplemented('snapshots'),
    deleteSnapshot: unimplemented('snapshots'),
  });
  return { server };
}

function unimplemented(what: string): grpc.handleUnaryCall<any, any> {
  return (_call, callback) => callback({ code: grpc.status.UNIMPLEMENTED, details: `Orderly does not support ${what} yet` });
}

function streamingPull(core: PubSubCore, call: grpc.ServerDuplexStream<any, any>): void {
  let consumer: Consumer | undefined;
  let subscription: string | undefined;
  const close = () => {
    if (consumer && subscription && core.hasSubscription(subscription)) core.runtime(subscription).removeConsumer(consumer.id);
    consumer = undefined;
  };
  call.on('data', (req: any) => {
    try {
      if (!consumer) {
        subscription = core.getSubscription(req.subscription).name;
        const runtime = core.runtime(subscription);
        const id = `stream-${randomUUID()}`;
        const maxMessages = Number(req.maxOutstandingMessages) || 1000;
        const ordered = runtime.spec.enableMessageOrdering;
        consumer = {
          id,
          affinity: id,
          maxPerKey: Number.MAX_SAFE_INTEGER,
          ackDeadlineSeconds: req.streamAckDeadlineSeconds || undefined,
          room: () => ({ messages: maxMessages - core.runtime(subscription!).leases.countFor(id), bytes: Number(req.maxOutstandingBytes) || Number.MAX_SAFE_INTEGER }),
          deliver: (batch: ReceivedMessage[]) => {
            call.write({
              receivedMessages: batch.map(receivedToProto),
              subscriptionProperties: { messageOrderingEnabled: ordered, exactlyOnceDeliveryEnabled: runtime.spec.enableExactlyOnceDelivery },
            });
          },
        };
        runtime.addConsumer(consumer);
      }
      if (req.ackIds?.length) void core.acknowledge(subscription!, req.ackIds);
      (req.modifyDeadlineAckIds as string[] | undefined)?.forEach((ackId, i) => {
        void core.modifyAckDeadline(subscription!, [ackId], req.modifyDeadlineSeconds[i] ?? 0);
      });
      // Acks and modacks change what the stream may receive next.
      if (subscription && core.hasSubscription(subscription)) core.runtime(subscription).scheduleDispatch();
    } catch (e) {
      call.destroy(Object.assign(new Error((e as Error).message), toStatus(e)));
      close();
    }
  });
  call.on('end', () => {
    close();
    call.end();
  });
  call.on('cancelled', close);
  call.on('error', close);
}
