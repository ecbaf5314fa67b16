import { InvalidArgumentError } from '../core/errors.js';
import type { PubSubCore } from '../core/pubsub-core.js';
import type { SubscriptionInput } from '../core/subscription-config.js';
import { pushConfigFromProto, receivedToProto, subscriptionFromProto, subscriptionToProto, timestampMs } from './proto-mapping.js';
import type { SubscriberRequests } from './pubsub-messages.js';
import { listPage, projectId, required, serviceHandlers, type RpcHandler } from './rpc.js';
import { inProjectOf, snapshotHandlers, type SnapshotMethod } from './snapshot-api.js';
import { refuseUnsupported, isSet } from './unsupported-fields.js';
import { subscriptionPatch } from './update-masks.js';

/** google.pubsub.v1.Subscriber's unary calls over the core (StreamingPull: streaming-pull.ts; snapshots: snapshot-api.ts). */
export function subscriberHandlers(core: PubSubCore): Record<string, RpcHandler> {
  const handlers = serviceHandlers<Omit<SubscriberRequests, SnapshotMethod>>({
    CreateSubscription: async (s) => {
      if (s.detached) throw new InvalidArgumentError('detached', 'is set by DetachSubscription; a subscription cannot be created detached');
      return subscriptionToProto(await core.createSubscription(s.name, topicsInProjectOf(s.name, subscriptionFromProto(s))));
    },
    GetSubscription: async (r) => subscriptionToProto(core.getSubscription(r.subscription)),
    UpdateSubscription: async (r) => {
      const subscription = required(r.subscription, 'subscription');
      const input = topicsInProjectOf(subscription.name, subscriptionFromProto(subscription, 'subscription.'));
      const patch = subscriptionPatch(required(r.updateMask, 'updateMask').paths, input as unknown as Record<string, unknown>);
      return subscriptionToProto(await core.updateSubscription(subscription.name, patch));
    },
    ListSubscriptions: async (r) => {
      const project = projectId(r.project);
      return listPage(r, core.listSubscriptions(project), (s) => s.name, 'subscriptions', `projects/${project}`, subscriptionToProto);
    },
    DeleteSubscription: async (r) => core.deleteSubscription(r.subscription),
    // On an exactly-once subscription invalid ack ids fail the call, with ErrorInfo details naming them.
    ModifyAckDeadline: async (r) => {
      await core.modifyAckDeadline(r.subscription, ackIdsOf(core, r), r.ackDeadlineSeconds);
    },
    Acknowledge: async (r) => {
      await core.acknowledge(r.subscription, ackIdsOf(core, r));
    },
    Pull: async (r, call) => {
      // Required, and positive, as in Pub/Sub: 0 is what a request that leaves it out carries. A call that
      // is gone takes nothing: what it leased would be out until its deadline and count as an attempt.
      const messages = await core.pull(r.subscription, {
        maxMessages: r.maxMessages,
        waitMs: r.returnImmediately ? 0 : 5_000,
        signal: call.signal,
      });
      const ackIds = messages.map((m) => m.ackId);
      if (ackIds.length) call.unsent(() => core.release(r.subscription, ackIds));
      return { receivedMessages: messages.map(receivedToProto) };
    },
    ModifyPushConfig: async (r) => {
      const pushConfig = required(r.pushConfig, 'pushConfig');
      refuseUnsupported(pushConfig, 'pushConfig', 'pushConfig.');
      await core.updateSubscription(r.subscription, {
        pushConfig: isSet(pushConfig) || pushConfig.noWrapper ? pushConfigFromProto(pushConfig) : null,
      });
    },
    Seek: async (r) => {
      if (r.snapshot) await core.seekToSnapshot(r.subscription, inProjectOf(r.subscription, 'snapshots', r.snapshot));
      // Publish times are whole ms: one is before a time within a ms exactly when it is before the next whole ms.
      else if (r.time) await core.seek(r.subscription, timestampMs(r.time, 'time', Math.ceil));
      else throw new InvalidArgumentError('time', 'is required, or snapshot: a seek needs a target');
      return {};
    },
  });
  return { ...handlers, ...snapshotHandlers(core).subscriber };
}

/** A unary ack or modack names at least one delivery, as Pub/Sub requires, and no malformed one (PubSubCore.checkAckIds). */
function ackIdsOf(core: PubSubCore, r: { subscription: string; ackIds: string[] }): string[] {
  if (!r.ackIds.length) throw new InvalidArgumentError('ackIds', 'is required: at least one ack id');
  core.checkAckIds(r.subscription, r.ackIds, 'ackIds');
  return r.ackIds;
}

/**
 * Pub/Sub names topics in full; Orderly also takes a bare topic id, resolved in the project of the
 * subscription being written (so a REST body's `"topic": "orders"` means the URL's project).
 */
function topicsInProjectOf(subscription: unknown, input: SubscriptionInput): SubscriptionInput {
  const full = (ref: string) => inProjectOf(subscription, 'topics', ref);
  const resolved: SubscriptionInput = { ...input, topic: typeof input.topic === 'string' ? full(input.topic) : input.topic };
  if (input.deadLetterPolicy?.deadLetterTopic)
    resolved.deadLetterPolicy = { ...input.deadLetterPolicy, deadLetterTopic: full(input.deadLetterPolicy.deadLetterTopic) };
  return resolved;
}
