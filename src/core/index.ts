export { InvalidAckIdsError, INVALID_ACK_ID, type AckResult } from './ack-results.js';
export { ManualClock, systemClock, type Clock } from './clock.js';
export * from './errors.js';
export { parseFilter, type Filter } from './filter.js';
export { LIMITS } from './limits.js';
export type { MessageInput, PubsubMessage, ReceivedMessage } from './message.js';
export { Publisher } from './publisher.js';
export {
  PubSubCore,
  type CoreOptions,
  type PullOptions,
  type Subscription,
  type SubscriptionValidator,
  type Topic,
} from './pubsub-core.js';
export { pushEnvelope } from './push-delivery.js';
export type { DeliveredMessage, MessageHandler, SubscribeOptions, Subscriber } from './subscriber.js';
export type { PushConfigSpec, SubscriptionInput, SubscriptionSpec } from './subscription-config.js';
export type { TopicInput, TopicSettings } from './topic-config.js';
export type { IamPolicy } from './iam-policies.js';
export type { ConsumerRoom, ConsumerSpec, SubscriptionHandle, SubscriptionState } from './consumer.js';
export type { MemoryOptions } from './memory-budget.js';
export type { Snapshot, SnapshotPatch } from './snapshots.js';
export type { SubscriptionEvent, SubscriptionListener } from './subscription-events.js';
export type { DeliveryCounters, SubscriptionMetrics } from './subscription-metrics.js';
