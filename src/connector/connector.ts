import type { PubsubMessage } from '../core/message.js';
import type { SubscriptionIdentity } from '../core/pubsub-core.js';
import type { SubscriptionSpec } from '../core/subscription-config.js';
import { SUBSCRIPTION_STATES, type SubscriptionState } from '../core/consumer.js';
import type { Logger } from '../log.js';
import type { TopicSchema } from '../schema/topic-schema.js';

/** One delivery handed to a connector. `id` names this delivery (not the message) in results. */
export interface ExportMessage {
  /** Names this delivery in a WriteResult. */
  id: string;
  /**
   * The message: data, attributes, ordering key, its per-key `sequence` (from 1) and `messageId`. A source
   * without per-key sequences (a remote Pub/Sub) gives `sequence` 0: recognise such a message by its
   * `messageId` (see `redeliveryMark`).
   */
  message: PubsubMessage;
  /**
   * Pub/Sub's delivery attempt: 1 for the first delivery, more for redeliveries, when the subscription has
   * a deadLetterPolicy; 0 without one (as Pub/Sub sets it). Not a way to tell a redelivery: see above.
   */
  deliveryAttempt: number;
}

/**
 * What happened to deliveries. A delivery the result does not mention is *buffered*: the connector holds
 * it and will report it from a later `write` or `flush` (the runner keeps its lease alive meanwhile).
 */
export interface WriteResult {
  /** Durable at the sink now (or found already there, so skipped as a duplicate): the runner acks these. */
  written: string[];
  /**
   * Could not be written. The runner nacks each with `error` (retried with the subscription's
   * retryPolicy; past deadLetterPolicy.maxDeliveryAttempts the message is dead-lettered with
   * `CloudPubSubDeadLetterSourceDeliveryErrorMessage: error`). `retryable: false` marks a message that
   * will never fit (bad JSON, a value the column cannot take); it is logged as such.
   */
  failed: { id: string; error: string; retryable: boolean }[];
  /**
   * Not attempted because an earlier message of the same ordering key failed in this batch; writing them
   * would break key order. The runner leaves them to the core, which redelivers them after the failed one.
   */
  deferred: string[];
}

/**
 * The sink as a whole is unusable (table missing, schema mismatch, bucket missing, access denied).
 * The runner puts the subscription in `state`, keeps the batch (nothing is nacked, so nothing is
 * dead-lettered), retries with backoff, and goes back to ACTIVE when a write succeeds.
 */
export class SinkStateError extends Error {
  /** The subscription's state while the sink is unusable. */
  readonly state: Exclude<SubscriptionState, 'ACTIVE'>;

  /**
   * @param state the subscription's state while the sink is unusable (a state Pub/Sub does not have, from
   *   a connector not type-checked, reads as RESOURCE_ERROR); @param message why, shown in status
   */
  constructor(state: Exclude<SubscriptionState, 'ACTIVE'>, message: string) {
    const known = SINK_STATES.includes(state);
    super(known ? message : `${message} (the connector gave the state ${JSON.stringify(state)}, which Pub/Sub does not have)`);
    this.name = 'SinkStateError';
    this.state = known ? state : 'RESOURCE_ERROR';
  }
}

const SINK_STATES: readonly string[] = SUBSCRIPTION_STATES.filter((s) => s !== 'ACTIVE');

/**
 * The sink takes one writer at a time and another process holds it (a DuckDB file another worker has
 * open). Thrown from `open()`: the runner waits as a standby — nothing is pulled from the subscription,
 * status shows this message — and tries again about once a second, taking over once the holder is gone.
 */
export class SinkBusyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SinkBusyError';
  }
}

/**
 * An export connector. The runner calls these one at a time, never concurrently.
 *
 * - `open()`: connect and check the sink. Throw `SinkStateError` when the sink is not usable; the runner
 *   retries with backoff until it succeeds or is stopped.
 * - `write(batch)`: the batch holds each ordering key's messages in publish order (on ordered
 *   subscriptions). Resolve once the `written` deliveries are durable. Within a key, never write a
 *   message after one that failed: report the rest as `deferred`. Throw `SinkStateError` for a sink-wide
 *   problem (the same batch is retried later on this connector).
 * - `flush(mode)`: for connectors that buffer. `'due'` (called about once a second, and after `notify`):
 *   finalize what a time limit says is due and report what finished meanwhile, without waiting for
 *   work in progress. `'all'` (shutdown, the runner's budget is full, a seek, a message that came again
 *   while an earlier delivery of it is held): finalize everything and
 *   resolve once all of it is reported. Both report buffered deliveries the same way as `write`.
 * - `close()`: release resources; called after a final `flush('all')`, after a failed `open()`, and after
 *   an unexpected error.
 *
 * Any other throw, from any call, is an unexpected failure of the sink: the runner puts the subscription
 * in RESOURCE_ERROR with the error as its reason, closes this connector, backs off, and opens a new one
 * (from the factory) to which it hands everything not yet reported, in order. Nothing is nacked for it,
 * so nothing is dead-lettered because the sink broke; a message that is itself at fault goes in `failed`.
 *
 * An ack is sent only for deliveries reported `written`, so a connector that crashes before reporting
 * loses nothing: the messages come again. Connectors that can, skip what a redelivery brings twice — by
 * what they remember under `ConnectorContext.identity.uid`, never under the subscription's name alone,
 * and never reporting `written` for a message they did not find at the sink.
 */
export interface Connector {
  /**
   * Running totals this connector keeps, by name (`{ rowsAppended: 12 }`): shown by `orderly status`, and as
   * Prometheus metrics when the factory declares them (`ConnectorFactory.counters`). They keep counting
   * across the connectors the runner makes after failures. Reading them must not block or throw (a getter
   * that throws is logged, and its counters are left out).
   */
  readonly counters?: ConnectorCounters;
  /** Connect and check the sink; throw SinkStateError when it is unusable (retried with backoff). */
  open(): Promise<void>;
  /** Write a batch (each key's messages in publish order); resolve once what it reports `written` is durable. */
  write(batch: ExportMessage[]): Promise<WriteResult>;
  /** Finalize buffered deliveries: what is due (`'due'`), or everything (`'all'`), and report them. */
  flush(mode: 'due' | 'all'): Promise<WriteResult>;
  /** Release resources (after the final flush, a failed open, or an unexpected error). */
  close(): Promise<void>;
  /**
   * For connectors that work in the background between calls (an upload): the piece of that work longest
   * without progress, and since when. Never blocks or throws (the runner asks at each flush interval and
   * after each call). The runner shows it in status as stalled once that passes the stall limit, as it
   * shows a call that has not returned: a hung background write is not silent.
   */
  busy?(): { name: string; since: number } | undefined;
}

/** A connector's running totals, by name. */
export type ConnectorCounters = Readonly<Record<string, number>>;

/** What a connector is given besides its own config section. */
export interface ConnectorContext {
  /** The subscription's full name (`projects/<project>/subscriptions/<id>`). */
  subscription: string;
  /**
   * Key sink progress (last sequences, written ids, manifests) by `identity.uid`: a subscription deleted
   * and created again under the same name, or in a new store, starts its per-key sequences and message
   * ids afresh, and progress kept under the name would take its new messages for ones already written.
   * `adoptsNameKeyedProgress`: the subscription predates uids, so progress a sink kept under its name is
   * its own; adopt it under the uid once.
   */
  identity: SubscriptionIdentity;
  /** The subscription's settings (ordering, retry and dead-letter policies, the export section). */
  spec: SubscriptionSpec;
  /** A logger bound to the subscription. */
  logger: Logger;
  /** Job-level settings: the data directory and what the job's settings sections provide. */
  settings: ConnectorSettings;
  /**
   * The most deliveries (and payload bytes) the runner holds unsettled. Once it holds that much it calls
   * `flush('all')` and waits for it, so a buffering connector should finalize well before (the object
   * writer rolls its files at a quarter, and holds back a write while half waits for upload) to keep data moving
   * while earlier files upload.
   */
  budget: { messages: number; bytes: number };
  /**
   * For connectors that finish work in the background (uploads): call when buffered deliveries became
   * written or failed between calls. The runner then calls `flush('due')` soon to collect them.
   */
  notify(): void;
  /**
   * The subscription's topic schema, resolved at each call (it follows UpdateTopic and new revisions), for
   * connectors that write with it (`useTopicSchema`); without `current` when the topic has no schema now,
   * but still reading each message by the revision it was published under. Absent in contexts made
   * without a core (a connector then can read no message with a schema).
   */
  topicSchema?(): TopicSchema;
  /**
   * Set when other workers (other `orderly run` processes, on this machine or others) may export the same
   * subscription at the same time — a remote Pub/Sub subscription shared by a fleet. Keep what the others
   * must see (manifests) in the sink itself, never on this machine's disk, and never assume you are the
   * only writer. The id names this worker (in status and manifests).
   */
  fleet?: { workerId: string };
}

/**
 * Job-level settings every connector of a job is given: the job's data directory (keep per-subscription
 * state under `subscriptionDir(dataDir, ...)`), and what each settings section of the job file provides
 * (see `SettingsSection.open`: a connector reads the keys its own section provides).
 */
export interface ConnectorSettings {
  /** The job's data directory (absolute). */
  readonly dataDir: string;
  /** What the job's settings sections provide, by key (e.g. `duckdbPath`, `objectStorage`). */
  readonly [provided: string]: unknown;
}

/** A result that reports nothing: every delivery of the call is still buffered. */
export const emptyResult = (): WriteResult => ({ written: [], failed: [], deferred: [] });
