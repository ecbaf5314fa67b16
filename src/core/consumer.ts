import type { AckResult } from './ack-results.js';
import type { OrderlyError } from './errors.js';
import type { StoredMessage } from '../store/store.js';
import type { ReceivedMessage } from './message.js';
import type { SubscriptionSpec } from './subscription-config.js';

/** Pub/Sub's subscription states, including the export-specific ones. */
export const SUBSCRIPTION_STATES = [
  'ACTIVE',
  'RESOURCE_ERROR',
  'PERMISSION_DENIED',
  'NOT_FOUND',
  'SCHEMA_MISMATCH',
  'IN_TRANSIT_LOCATION_RESTRICTION',
] as const;
export type SubscriptionState = (typeof SUBSCRIPTION_STATES)[number];

/** How much more a consumer takes now; delivery stops when either reaches 0. */
export interface ConsumerRoom {
  messages: number;
  bytes: number;
}

/**
 * A delivery in the store's own form, for a consumer that only writes it out (`ConsumerSpec.deliverStored`):
 * `message` is shared with the subscription's window, every subscription of the topic and its redeliveries,
 * so it is read, never changed or kept.
 */
export interface StoredDelivery {
  ackId: string;
  message: StoredMessage;
  /** As ReceivedMessage's. */
  deliveryAttempt: number;
  /** Pub/Sub's size of the message (payload, key, attributes), as flow control counts it. */
  size: number;
}

/**
 * Something that takes deliveries as they become available: a callback subscriber, a push worker, a
 * waiting pull, a StreamingPull stream, an export runner. It attaches to a subscription with
 * `PubSubCore.attach` and gets a `SubscriptionHandle` back. It takes its deliveries either as messages of
 * its own (`deliver`) or, when it only encodes them at once, in the store's form (`deliverStored`).
 */
export type ConsumerSpec = ConsumerOptions &
  ({ deliver(batch: ReceivedMessage[]): void; deliverStored?: never } | { deliverStored(batch: StoredDelivery[]): void; deliver?: never });

/** What every consumer tells the core besides how it takes its deliveries. */
interface ConsumerOptions {
  /** Consumers sharing an affinity name count as one client for key affinity (default: each its own). */
  readonly affinity?: string;
  /** How many messages of one key one delivery may carry (push: 1; default: no limit). */
  readonly maxPerKey?: number;
  /** Lease length for what this consumer receives; the subscription's ackDeadlineSeconds if unset. */
  readonly ackDeadlineSeconds?: number;
  /**
   * The consumer handles what it receives strictly in delivery order (an export runner), so a key's
   * next messages may go to it while earlier ones are still outstanding there. Deliveries that a
   * failure revoked (see `SubscriptionHandle.isLive`) must be dropped, not handled.
   */
  readonly pipelined?: boolean;
  /**
   * The core keeps the leases of this consumer's unsettled deliveries alive for up to this many seconds
   * after each delivery (a handler still running, a record waiting in an open file); past it they expire
   * as usual. Unset: leases run for the ack deadline only, unless the consumer extends them.
   */
  readonly keepAliveSeconds?: number;
  /**
   * While this consumer is attached, the subscription keeps at most this many of its messages in memory
   * (never more than the core's `memory.messagesPerSubscription`): a consumer whose own sink takes memory
   * of the same process (an export into DuckDB) asks the core to read less of the backlog ahead of it.
   */
  readonly windowMessages?: number;
  /** Called (synchronously, from dispatch) before every delivery. */
  room(): ConsumerRoom;
  /**
   * A seek reset the subscription (called before anything it replays is delivered): a key's next
   * deliveries may now come before, or skip past, what the consumer holds of it.
   */
  sought?(): void;
  /**
   * The subscription was deleted (NOT_FOUND) or detached from its topic (FAILED_PRECONDITION): nothing more
   * arrives and the ack ids handed out are stale. `reason` is the error to end with.
   */
  detached?(reason: OrderlyError): void;
}

/**
 * A consumer's port to one subscription. Everything a consumer does to the subscription goes through
 * it; it stays valid across a seek and becomes inert once the subscription is deleted or detached (`attached` false).
 */
export interface SubscriptionHandle {
  readonly subscription: string;
  /** The subscription's current settings. */
  readonly spec: Readonly<SubscriptionSpec>;
  readonly attached: boolean;
  /** The consumer has room again (a handler finished): deliver what is ready, soon. */
  kick(): void;
  /** False once the delivery's lease ended (settled, expired, or revoked by an earlier message's failure). */
  isLive(ackId: string): boolean;
  /** Deliveries out to this consumer and not yet settled. */
  outstanding(): number;
  /** The bytes of those deliveries' messages (as flow control counts them). */
  outstandingBytes(): number;
  /**
   * Resolves once the acks are durable, with what became of each id. Stale or unknown ack ids change
   * nothing (they come back as `invalidAckIds`; Pub/Sub ignores them unless the subscription is exactly-once).
   */
  acknowledge(ackIds: string[]): Promise<AckResult>;
  /** 0 seconds nacks (`error` says why, for the dead-letter topic); otherwise the lease runs that long from now. */
  modifyAckDeadline(ackIds: string[], seconds: number, error?: string): AckResult;
  /** Stops deliveries to this consumer; what it holds stays leased until settled or expired. */
  detach(): void;
}
