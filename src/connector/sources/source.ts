import type { ConsumerRoom, SubscriptionState } from '../../core/consumer.js';
import type { ReceivedMessage } from '../../core/message.js';
import type { SubscriptionSpec } from '../../core/subscription-config.js';

/**
 * Where an export reads its subscription from: the embedded core, or a subscription on a remote Pub/Sub
 * v1 endpoint. Both hand the export runner the same thing — deliveries in per-key order, leases kept
 * alive while the runner holds them, ack and nack by delivery id — so connectors never know which source
 * fed them.
 */
export interface ExportSource {
  /** The subscription's full name (`projects/<project>/subscriptions/<id>`). */
  readonly subscription: string;
  /**
   * Checks that the subscription can be read and returns its settings (ordering, retention, policies,
   * with the export section). Throws SourceError while it cannot (the runner shows the reason and
   * retries with backoff).
   */
  prepare(): Promise<SubscriptionSpec>;
  /**
   * Starts deliveries to `consumer`: each ordering key in publish order, never more than its room allows.
   * Undefined when the subscription is no longer the one the runner was made for (deleted, created again).
   */
  attach(consumer: SourceConsumer): DeliveryHandle | undefined;
  /** The sink's state, mirrored on the subscription where the source keeps one (the embedded core's). */
  setState(state: SubscriptionState, reason?: string): void;
  /** What the source reports about itself, for status. */
  status(): SourceStatus;
}

/** The export runner, as a source sees it. */
export interface SourceConsumer {
  /** How many more messages (and payload bytes) the runner takes now. */
  room(): ConsumerRoom;
  /** Deliveries, each key's in order; called again with more as they arrive. */
  deliver(batch: ReceivedMessage[]): void;
  /** The subscription was sought (see ConsumerSpec.sought); only a source that knows of seeks calls it. */
  sought?(): void;
}

/** The runner's port to its subscription. Inert (acks and nacks ignored) once `attached` is false. */
export interface DeliveryHandle {
  readonly attached: boolean;
  /** False once the delivery's lease ended: settled, expired, or revoked because an earlier message of its key failed. */
  isLive(ackId: string): boolean;
  /** Resolves once the acks are sent (a lost ack only means a redelivery, which sinks recognise). */
  acknowledge(ackIds: string[]): Promise<void>;
  /**
   * Nacks: each message comes again (past the subscription's deadLetterPolicy it is dead-lettered), with
   * the later messages of its key after it, in order. `error` says why (the embedded core passes it to
   * the dead-letter topic; a remote one only counts the delivery attempt).
   */
  nack(ackIds: string[], error: string): void;
  /** Stops deliveries, once the acks sent are through; what the runner still holds is released (it comes again). */
  detach(): Promise<void>;
}

/** A source's own condition, shown next to the sink's state in status. */
export interface SourceStatus {
  /** `embedded`, or the remote endpoint (host:port, or Google Cloud Pub/Sub's). */
  location: string;
  /** `streaming` while messages can flow; `connecting` before; `retrying` after a failure (see `error`); `refused` for a setting that will not work. */
  state: 'connecting' | 'streaming' | 'retrying' | 'refused';
  /** Why the source is not streaming, naming the subscription and endpoint. */
  error?: string;
  /** Failed attempts to reach the subscription since it last streamed. */
  retries: number;
  /** Ordering keys whose later messages are held back until a failed message of theirs comes again (a remote source). */
  keysWaiting?: number;
}

/** Refused settings change rarely: a source that refused is tried again at the backoff's slowest. */
export const REFUSED_RETRY_MS = 60_000;

/** The source cannot serve the subscription now (missing, unreachable, refused credentials, a setting it will not honour). */
export class SourceError extends Error {
  constructor(
    message: string,
    /** `refused`: a setting of the subscription the job cannot work with (retried slowly, in case it changes). */
    readonly kind: 'retrying' | 'refused' = 'retrying',
  ) {
    super(message);
    this.name = 'SourceError';
  }
}
