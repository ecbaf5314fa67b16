import * as grpc from '@grpc/grpc-js';
import { InvalidArgumentError } from '../core/errors.js';
import type { MessageInput } from '../core/message.js';
import type { PubSubCore } from '../core/pubsub-core.js';
import type { Logger } from '../log.js';
import { subscriptionPatch, topicPatch } from './update-masks.js';
import { toStatus, UndecodableRequest, withUndecodableRequests } from './grpc-errors.js';
import { loadPubsubProto } from './pubsub-proto.js';
import { snapshotRpcs } from './snapshot-api.js';
import { streamingPull } from './streaming-pull.js';
import { refuseUnsupported } from './unsupported-fields.js';
import { receivedToProto, subscriptionFromProto, subscriptionToProto, timestampMs, topicToProto, type ProtoDuration } from './proto-mapping.js';

type Handler = (request: any) => Promise<unknown>;

/** Unary handlers: OrderlyErrors become Pub/Sub's status codes; an undecodable request is INVALID_ARGUMENT. */
function unary(method: string, fn: Handler, logger?: Logger): grpc.handleUnaryCall<any, any> {
  return (call, callback) => {
    const request: unknown = call.request;
    const result = request instanceof UndecodableRequest ? Promise.reject(request.error(method)) : fn(request);
    result.then(
      (response) => callback(null, response ?? {}),
      (e: unknown) => callback(toStatus(e, logger, method)),
    );
  };
}

/** A message field the request must carry (proto3 decodes an absent one as null). */
function required<T>(value: T | null | undefined, field: string): T {
  if (value === null || value === undefined) throw new InvalidArgumentError(field, 'is required');
  return value;
}

/**
 * google.pubsub.v1 Publisher and Subscriber over the core, for Google's client libraries via
 * PUBSUB_EMULATOR_HOST. `options` are grpc-js server options (limits, keepalive, interceptors).
 */
export function pubsubServices(core: PubSubCore, options: grpc.ServerOptions = {}, logger?: Logger): { server: grpc.Server } {
  const proto = loadPubsubProto() as any;
  const v1 = proto.google.pubsub.v1;
  const server = new grpc.Server(options);
  const project = (p: string) => p.replace(/^projects\//, '');
  const rpcs = (handlers: Record<string, Handler>) =>
    Object.fromEntries(Object.entries(handlers).map(([name, fn]) => [name, unary(name, fn, logger)]));
  const snapshots = snapshotRpcs(core);

  server.addService(withUndecodableRequests(v1.Publisher.service), rpcs({
    createTopic: async (t) => {
      refuseUnsupported(t, 'topic', '');
      return topicToProto(await core.createTopic(t.name, { labels: t.labels }));
    },
    updateTopic: async (r) => {
      const topic = required(r.topic, 'topic');
      return topicToProto(await core.updateTopic(topic.name, topicPatch(required(r.updateMask, 'updateMask').paths, topic)));
    },
    getTopic: async (r) => topicToProto(core.getTopic(r.topic)),
    listTopics: async (r) => ({ topics: core.listTopics(project(r.project)).map(topicToProto), nextPageToken: '' }),
    listTopicSubscriptions: async (r) => ({ subscriptions: core.listTopicSubscriptions(r.topic), nextPageToken: '' }),
    ...snapshots.publisher,
    deleteTopic: async (r) => core.deleteTopic(r.topic),
    detachSubscription: async (r) => core.detachSubscription(r.subscription),
    publish: async (r) => {
      const keys = new Set((r.messages as { orderingKey: string }[]).map((m) => m.orderingKey));
      if (keys.size > 1) throw new InvalidArgumentError('messages', 'all messages of one publish request must share an ordering key');
      const messages: MessageInput[] = r.messages.map((m: any) => ({ data: m.data, attributes: m.attributes, orderingKey: m.orderingKey }));
      return { messageIds: await core.publish(r.topic, messages) };
    },
  }));

  server.addService(withUndecodableRequests(v1.Subscriber.service), {
    ...rpcs({
      createSubscription: async (s) => {
        if (s.detached) throw new InvalidArgumentError('detached', 'is set by DetachSubscription; a subscription cannot be created detached');
        return subscriptionToProto(await core.createSubscription(s.name, subscriptionFromProto(s)));
      },
      getSubscription: async (r) => subscriptionToProto(core.getSubscription(r.subscription)),
      updateSubscription: async (r) => {
        const subscription = required(r.subscription, 'subscription');
        const patch = subscriptionPatch(required(r.updateMask, 'updateMask').paths, subscriptionFromProto(subscription, 'subscription.') as unknown as Record<string, unknown>);
        return subscriptionToProto(await core.updateSubscription(subscription.name, patch));
      },
      listSubscriptions: async (r) => ({ subscriptions: core.listSubscriptions(project(r.project)).map(subscriptionToProto), nextPageToken: '' }),
      deleteSubscription: async (r) => core.deleteSubscription(r.subscription),
      // On an exactly-once subscription invalid ack ids fail the call, with ErrorInfo details naming them.
      modifyAckDeadline: async (r) => {
        await core.modifyAckDeadline(r.subscription, r.ackIds, r.ackDeadlineSeconds);
      },
      acknowledge: async (r) => {
        await core.acknowledge(r.subscription, r.ackIds);
      },
      pull: async (r) => {
        const messages = await core.pull(r.subscription, { maxMessages: r.maxMessages || 100, waitMs: r.returnImmediately ? 0 : 5_000 });
        return { receivedMessages: messages.map(receivedToProto) };
      },
      modifyPushConfig: async (r) => {
        const pushConfig = required(r.pushConfig, 'pushConfig');
        refuseUnsupported(pushConfig, 'pushConfig', 'pushConfig.');
        await core.updateSubscription(r.subscription, { pushConfig: pushConfig.pushEndpoint ? pushConfig : null });
      },
      seek: async (r) => {
        if (r.snapshot) await core.seekToSnapshot(r.subscription, r.snapshot);
        else if (r.time) await core.seek(r.subscription, timestampMs(r.time as ProtoDuration));
        else throw new InvalidArgumentError('time', 'is required, or snapshot: a seek needs a target');
        return {};
      },
      ...snapshots.subscriber,
    }),
    streamingPull: (call: grpc.ServerDuplexStream<any, any>) => streamingPull(core, call, logger),
  });
  return { server };
}
