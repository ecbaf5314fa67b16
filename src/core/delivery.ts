import type { StoredMessage } from '../store/store.js';

// An entry and its lease name each other; both are generic over the queue that holds them (KeyQueue) so
// that the queue and the lease manager each depend on this file and not on one another.

/** One message in a key's delivery window. */
export interface Entry<Q = unknown> {
  /** Without its payload when `spilled` (the store has it). */
  message: StoredMessage;
  /** Left out of memory to stay within the subscription's payload budget; read back when delivered. */
  spilled: boolean;
  /** Pub/Sub's size of the message (payload included): flow control and backlog bytes. */
  size: number;
  acked: boolean;
  /** Nacks + expiries so far; drives deliveryAttempt, backoff and dead-lettering. */
  failures: number;
  lease?: Lease<Q>;
  /** Times handed out so far (any cause); above 0 the next delivery is a redelivery. */
  deliveries: number;
  /** Why the last delivery failed, when a sink said so (becomes CloudPubSubDeadLetterSourceDeliveryErrorMessage). */
  lastError?: string;
  /**
   * 'due': its attempts reached maxDeliveryAttempts while it was revoked (see SubscriptionRuntime.fail),
   * so it goes to the dead-letter topic when its turn comes. 'sent': forwarded there, so acked for good:
   * an earlier message's failure rewinds the key past it without making it deliverable again.
   */
  deadLetter: 'due' | 'sent' | undefined;
}

/** One delivery out to a consumer: its ack id and until when it holds. */
export interface Lease<Q = unknown> {
  ackId: string;
  /** The ack id's last part, unique per LeaseManager: what it finds the lease by. */
  serial: number;
  queue: Q;
  entry: Entry<Q>;
  deadline: number;
  consumer: string;
  /** When it was granted: keep-alive (ConsumerSpec.keepAliveSeconds) counts from here. */
  grantedAt: number;
}
