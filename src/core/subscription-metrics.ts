export interface DeliveryCounters {
  delivered: number;
  redelivered: number;
  acked: number;
  nacked: number;
  expired: number;
  deadLettered: number;
  /**
   * Messages dropped unacked because they passed the subscription's messageRetentionDuration (never
   * delivered, or out again and not acked): lost to the subscription, and to an export that never wrote them.
   */
  retentionExpired: number;
}

export const emptyCounters = (): DeliveryCounters => ({
  delivered: 0,
  redelivered: 0,
  acked: 0,
  nacked: 0,
  expired: 0,
  deadLettered: 0,
  retentionExpired: 0,
});

export interface SubscriptionMetrics {
  /** Unacked messages: those in memory, and those still in the store (read lazily). */
  backlogMessages: number;
  /** Their bytes; for messages not in memory, estimated from the average of those that are. */
  backlogBytes: number;
  /** Payload bytes this subscription holds in memory (all subscriptions share CoreOptions.memory.payloadBytes). */
  residentBytes: number;
  /** Messages in memory (at most `windowMessages`, once what was read before a smaller window drained). */
  heldMessages: number;
  /**
   * Messages it keeps in memory: CoreOptions.memory.messagesPerSubscription, or fewer while a consumer
   * attached asks for fewer (ConsumerSpec.windowMessages: a table export).
   */
  windowMessages: number;
  outstandingMessages: number;
  oldestUnackedPublishTime: number | undefined;
  /** Keys with the most unacked messages, largest first: the hot keys. */
  topKeys: { orderingKey: string; backlog: number }[];
  counters: DeliveryCounters;
  /** Why a delivery was last nacked, when the nack said (a push endpoint's answer, an export sink's refusal). */
  lastNackReason?: { message: string; at: string };
}
