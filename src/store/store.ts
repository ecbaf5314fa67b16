/**
 * The durable store behind the core. Deliberately narrow and engine-neutral (plain records, promises) so
 * a distributed engine can implement it later; nothing here names SQLite.
 *
 * Durability contract: when a write method's promise resolves, the write survives a kill -9 of the
 * process (and, with `durability: 'fsync'`, a power loss). Writes issued in the same tick may be grouped
 * into one commit; they resolve together.
 */
import { OrderlyError } from '../core/errors.js';

export interface StoredMessage {
  /** Store-wide publish order; also the message id. */
  seq: number;
  topicUid: number;
  orderingKey: string;
  /** Position within (topic, orderingKey), from 1. */
  keySeq: number;
  publishTime: number;
  data: Buffer;
  /** NO_ATTRIBUTES when it has none, as read back from the store. */
  attributes: Record<string, string>;
}

/**
 * The attributes of every message read back from the store without any: one frozen object, not one each,
 * as the subscription's window keeps thousands of messages for a while and every object it keeps is copied
 * by the young-generation GC and marked by every full one. Consumers get an object of their own
 * (toPubsubMessage): one may add to what it received.
 */
export const NO_ATTRIBUTES: Record<string, string> = Object.freeze({});

export interface TopicRecord {
  uid: number;
  name: string;
  labels: Record<string, string>;
  /** The topic's other settings (retention, schema settings) as JSON-safe data; the core owns its shape. */
  settings: unknown;
}

/** A stored schema (SchemaService): its name and its JSON-safe record, whose shape src/schema owns. */
export interface SchemaRow {
  name: string;
  record: unknown;
}

/** A resource's IAM policy (GetIamPolicy/SetIamPolicy), JSON-safe, shape owned by the core. */
export interface IamPolicyRow {
  resource: string;
  policy: unknown;
}

export interface SubscriptionRecord {
  name: string;
  /**
   * Random, fixed at creation: a subscription deleted and created again under the same name gets a new
   * one. Sinks key what they remember (per-key progress, written ids, manifests) by it, never by name.
   */
  uid: string;
  /**
   * Created before subscriptions had uids: its sinks may still hold progress under its name, which they
   * adopt once (so an upgrade keeps exactly-once). False for every subscription created since.
   */
  adoptsNameKeyedProgress: boolean;
  topicUid: number;
  /** The subscription's spec as JSON-safe data; the core owns its shape. */
  spec: unknown;
  /**
   * Every message with seq <= lowSeq is acked for this subscription (or predates it): set at creation to
   * the last seq, raised by compaction, moved either way by seek.
   */
  lowSeq: number;
  /** Detached from its topic (DetachSubscription): it keeps no backlog and receives nothing. */
  detached: boolean;
  /**
   * Where the subscription began retaining acked messages: at creation the last seq (nothing before was
   * its own), and when retainAckedMessages is turned on its acked prefix (all at or below is acked already).
   * Its own retention brings back on a seek only what is above it; one acked above it before retention
   * began is brought back too (more than Pub/Sub would, never less). 0 for stores from before this.
   */
  acksRetainedAfter: number;
}

/** Which acked messages a seek may make unacked again: those a retention keeps (publish times, ms). */
export interface RetainedAcks {
  /** Published at or after this, within the topic's messageRetentionDuration (Infinity: none). */
  topicSince: number;
  /** Published at or after this and after the record's acksRetainedAfter (Infinity: no retainAckedMessages). */
  subscriptionSince: number;
}

/**
 * A snapshot: the acknowledgement state of a subscription at one moment, over its topic's messages. Every
 * message with seq <= lowSeq is acked in it; above lowSeq, exactly those in its ack set (copied from the
 * subscription) are, so everything published after it is unacked. The messages it holds (seq > lowSeq)
 * are kept by compaction until it expires.
 */
export interface SnapshotRecord {
  /** Fixed at creation; a snapshot created again under the same name is another one. */
  uid: number;
  name: string;
  topicUid: number;
  lowSeq: number;
  /** When it expires (ms). */
  expireTime: number;
  /** The latest expireTime it may be given: 7 days after the oldest message it holds (ms). */
  maxExpireTime: number;
  labels: Record<string, string>;
}

/** What `Store.createSnapshot` needs; the store reads the subscription's state in one transaction. */
export interface SnapshotRequest {
  name: string;
  /** The source subscription, whose acks are copied. */
  subscription: string;
  topicUid: number;
  labels: Record<string, string>;
  /** Unacked messages published before this (ms) are past the subscription's retention: out of its backlog. */
  expiredBefore: number;
  /** Its expiry: `lifetimeMs` after the publish time of the oldest message it holds (now if none). */
  now: number;
  lifetimeMs: number;
  /** Refused (nothing written) when that leaves it less than this to live. */
  minLifetimeMs: number;
}

/** A snapshot refused: the oldest message it would hold leaves it less than its minimum lifetime. */
export interface SnapshotTooOld {
  oldestPublishTime: number;
}

export interface BacklogRow {
  /** `data` holds the payload when `dataBytes` is its length (read within the caller's budget), else it is empty. */
  message: StoredMessage;
  /** The payload's size. */
  dataBytes: number;
  acked: boolean;
  /** Failed deliveries (nacks + expiries) so far. */
  failures: number;
}

/** Which subscription's view of a topic a backlog read is for (its acks and failure counts). */
export interface BacklogSource {
  name: string;
  topicUid: number;
}

export interface Store {
  /** Where the data lives, for messages a user can act on. */
  readonly location: string;
  /** Random, fixed when the store was created. */
  readonly id: string;

  lastSeq(): Promise<number>;
  /** Per ordering key of the topic: the last per-key sequence of its committed (or compacted) messages; 0 if none. */
  lastKeySeqs(topicUid: number, orderingKeys: string[]): Map<string, number>;

  listTopics(): Promise<TopicRecord[]>;
  createTopic(name: string, labels: Record<string, string>, settings: unknown): Promise<TopicRecord>;
  /** Writes the topic's labels and settings. */
  updateTopic(topic: TopicRecord): Promise<void>;
  deleteTopic(uid: number): Promise<void>;

  listSchemas(): Promise<SchemaRow[]>;
  /** Creates or replaces a schema's record. */
  putSchema(schema: SchemaRow): Promise<void>;
  deleteSchema(name: string): Promise<void>;

  listIamPolicies(): Promise<IamPolicyRow[]>;
  /** Sets a resource's policy; `undefined` removes it (the resource was deleted). */
  putIamPolicy(resource: string, policy: unknown): Promise<void>;

  listSubscriptions(): Promise<SubscriptionRecord[]>;
  createSubscription(sub: SubscriptionRecord): Promise<void>;
  /**
   * `acksRetainedAfter`, when the subscription begins retaining acked messages now: its acked prefix (every
   * seq at or below is acked, and gone for it), as the running core knows it.
   */
  updateSubscriptionSpec(name: string, spec: unknown, acksRetainedAfter?: number): Promise<void>;
  deleteSubscription(name: string): Promise<void>;
  /**
   * Detaches the subscription: marks it detached and drops its backlog (its acks and failure counts go,
   * and its lowSeq moves to `lowSeq`, so compaction keeps nothing for it).
   */
  detachSubscription(name: string, lowSeq: number): Promise<void>;

  listSnapshots(): Promise<SnapshotRecord[]>;
  /**
   * Copies the subscription's ack state, after every write issued so far has landed; refused (nothing written)
   * when the oldest message it would hold leaves it less than `minLifetimeMs` to live.
   */
  createSnapshot(request: SnapshotRequest): Promise<SnapshotRecord | SnapshotTooOld>;
  /** Writes the snapshot's labels and expireTime. */
  updateSnapshot(snapshot: SnapshotRecord): Promise<void>;
  deleteSnapshot(uid: number): Promise<void>;
  /**
   * Gives the subscription exactly the snapshot's ack state (failure counts reset). Returns the new lowSeq,
   * or undefined if the snapshot is gone (then nothing changed).
   */
  seekToSnapshot(sub: SubscriptionRecord, snapshotUid: number): Promise<number | undefined>;

  append(messages: StoredMessage[]): Promise<void>;
  ack(subscription: string, seqs: number[]): Promise<void>;
  setFailures(subscription: string, seq: number, failures: number): Promise<void>;
  /** Resolves once every write issued so far has committed (or failed). */
  flush(): Promise<void>;
  /**
   * Called once if the store turns out to be unusable after it opened (damage found by the integrity check
   * that runs in the background, so that opening stays fast at any size, or that check could not run);
   * every write fails from then on.
   */
  onFatal(listener: (error: Error) => void): void;

  /**
   * A message's payload, read synchronously: the core keeps a bounded amount of payload in memory and
   * reads the rest back while dispatching, which is synchronous. Undefined if the message is gone.
   */
  readData(seq: number): Buffer | undefined;
  /**
   * The next messages of the source's topic after `afterSeq`, oldest first, at most `limit`, with the
   * subscription's ack state; payloads are included in order until they would exceed `dataBytes` in total.
   * Synchronous and bounded by `limit`: the core reads its backlog lazily, a window at a time.
   */
  scan(source: BacklogSource, afterSeq: number, limit: number, dataBytes: number): BacklogRow[];
  /** Like `scan`, for one ordering key: its messages from `fromKeySeq` on with seq <= `maxSeq`. */
  scanKey(source: BacklogSource, orderingKey: string, fromKeySeq: number, maxSeq: number, limit: number, dataBytes: number): BacklogRow[];
  /** How many messages of the source's topic with afterSeq < seq <= upToSeq the subscription has not acked. */
  countUnacked(source: BacklogSource, afterSeq: number, upToSeq: number): number;
  /**
   * The attributes of the messages of the source's topic with afterSeq < seq <= upToSeq that the
   * subscription has not acked, in seq order, without their payloads: what a filtered subscription's
   * backlog count needs (`countUnacked` cannot apply the filter). Bounded by the range the caller gives.
   */
  unackedAttributes(source: BacklogSource, afterSeq: number, upToSeq: number): { seq: number; attributes: Record<string, string> }[];
  /**
   * The ordering keys with the most unacked messages with afterSeq < seq <= upToSeq, most first (then by
   * key), at most `limit`; messages without a key are not counted. Reads the whole range: for a one-off
   * report (offline status), not for the running core.
   */
  unackedByKey(source: BacklogSource, afterSeq: number, upToSeq: number, limit: number): { orderingKey: string; backlog: number }[];
  /**
   * How many of the topic's messages with afterSeq < seq <= upToSeq the store holds and their payload bytes,
   * reading the first `limit` of them at most; `lastSeq` is the last one read (`afterSeq` if none).
   * Bounded by `limit`: what a snapshot keeps is counted a range at a time (core/snapshot-holdings.ts).
   */
  messageTotals(topicUid: number, afterSeq: number, upToSeq: number, limit: number): MessageTotals;
  /** Publish time of the topic's first message after `afterSeq`, if any. */
  firstPublishTimeAfter(topicUid: number, afterSeq: number): number | undefined;
  /**
   * Where the run of the topic's messages published before `before` that follows `afterSeq` ends, looking
   * at `limit` messages at most: `upTo` is its last seq (`afterSeq` if there is none), `more` says all
   * `limit` were in it (it may go on), and `liveFrom` is the publish time of the message that ended it.
   * Bounded by `limit`: the core calls it a step a turn.
   */
  expiredRun(topicUid: number, afterSeq: number, before: number, limit: number): ExpiredRun;
  /**
   * Marks messages published before `time` acked and the later ones unacked — those later ones that are
   * acked now only if a retention keeps them (`retained`; the others stay acked). Returns the new lowSeq.
   */
  seek(sub: SubscriptionRecord, time: number, retained: RetainedAcks): Promise<number>;
  /** Raises watermarks and deletes what the plan says no subscription can be given again. */
  compact(plan: CompactionPlan): Promise<{ deletedMessages: number }>;
  /** Bytes the store's files take on disk now (for metrics: what compaction gives back); a store that cannot tell leaves it out. */
  diskBytes?(): number;

  close(): Promise<void>;
}

export interface MessageTotals {
  messages: number;
  bytes: number;
  lastSeq: number;
}

export interface ExpiredRun {
  upTo: number;
  more: boolean;
  liveFrom?: number;
}

/** Computed by the core, which alone knows what is in flight; the store only carries it out. */
export interface CompactionPlan {
  /** Subscription name -> new lowSeq (only ever raised by compaction). */
  watermarks: Map<string, number>;
  /** Topic uid -> which of its messages to delete. */
  topics: Map<number, TopicCompaction>;
  /** Topic uid -> keep its messages with seq >= this, whatever the rules above say (a live snapshot holds them). */
  keepFromSeq: Map<number, number>;
}

/**
 * A topic's messages with seq <= `upTo` published before `publishedBefore` (the topic's own
 * messageRetentionDuration keeps the later ones, acked or not) are deleted unless a subscription needs
 * them: each entry of `needs` is one subscription, needing the messages with seq > afterSeq published at
 * or after `since` (past its lowest held message, within its messageRetentionDuration).
 */
export interface TopicCompaction {
  upTo: number;
  publishedBefore: number;
  needs: [afterSeq: number, since: number][];
}

/**
 * A write the store could not make because its disk is full. Nothing of it was stored (the transaction
 * rolled back); the store stays usable, and the same write succeeds once space is freed. A publish or an
 * ack that fails so answers RESOURCE_EXHAUSTED (HTTP 429), which Google's clients retry.
 */
export class StoreFullError extends OrderlyError {
  constructor(
    readonly file: string,
    cause: unknown,
  ) {
    super(
      'RESOURCE_EXHAUSTED',
      `the Orderly store at ${file} could not take the write: its disk is full (${cause instanceof Error ? cause.message : String(cause)}). ` +
        'Nothing of it was stored; retry once space is freed on that file system.',
    );
    this.name = 'StoreFullError';
  }
}

/**
 * The store is open already in this process (another `SqliteStore.open` of the same directory, not closed):
 * two cores on one store would each number and write messages as if alone (the second one's first
 * publish failed with an untyped SQLITE_CONSTRAINT). Another process is kept out by the CLI's job lock.
 */
export class StoreInUseError extends OrderlyError {
  constructor(readonly file: string) {
    super(
      'FAILED_PRECONDITION',
      `the Orderly store at ${file} is already open in this process: share that SqliteStore (and its PubSubCore), or close it first`,
    );
    this.name = 'StoreInUseError';
  }
}

export class StoreCorruptError extends Error {
  /**
   * `foundRunning`: found by the whole-file check that runs beside the writes after opening, so what was
   * written since the start went into the file (the damage itself was left as it was).
   */
  constructor(
    readonly file: string,
    cause: unknown,
    foundRunning = false,
  ) {
    const reason = cause instanceof Error ? cause.message : String(cause);
    super(
      foundRunning
        ? `the Orderly store at ${file} is damaged (${reason}), found by the check that runs after start; it takes no more ` +
            'writes. What was published and acked since the start is in it. Restore it from a backup together with what its ' +
            "sinks hold (docs/connectors.md, 'The store is never reset'), or point Orderly at another data directory."
        : `the Orderly store at ${file} cannot be read (${reason}). ` +
            'It was not modified. Restore it from a backup, or point Orderly at another data directory.',
    );
    this.name = 'StoreCorruptError';
  }
}

/**
 * A command that writes nothing (a read-only query, an audit) opened a store an older Orderly wrote, which
 * this one upgrades when it opens it for writing: refused rather than upgraded, the file left as it is.
 * The Orderly that wrote it can still open it, and a writing command upgrades it.
 */
export class StoreUpgradeError extends OrderlyError {
  constructor(
    readonly file: string,
    readonly schema: number,
  ) {
    super(
      'FAILED_PRECONDITION',
      `the Orderly store at ${file} was written by an older Orderly (store schema ${schema}) and needs an upgrade, which a ` +
        'read-only command does not make. It was not modified. Run a command that writes to this data directory once ' +
        '(orderly run, orderly status or orderly publish) to upgrade it; the older Orderly cannot open it after that.',
    );
    this.name = 'StoreUpgradeError';
  }
}

/**
 * The store was written by a newer Orderly (a higher schema version than this one reads). Refused at
 * start, naming both versions: it was not modified, and nothing of the data directory was read by rules
 * older than the ones that wrote it.
 */
export class StoreVersionError extends Error {
  constructor(
    readonly file: string,
    readonly schema: number,
    readonly reads: number,
  ) {
    super(
      `the Orderly store at ${file} was written by a newer Orderly (store schema ${schema}; this Orderly reads schema ${reads} ` +
        'and older). It was not modified. Run that Orderly version, or a newer one, on this data directory.',
    );
    this.name = 'StoreVersionError';
  }
}

/**
 * The whole-file check of a store could not run (its thread failed to start or stopped without a
 * result). Nothing was found damaged; the store takes no more writes, as it cannot be vouched for.
 */
export class StoreCheckError extends Error {
  constructor(
    readonly file: string,
    cause: unknown,
  ) {
    super(
      `the Orderly store at ${file} could not be checked (${cause instanceof Error ? cause.message : String(cause)}); it takes ` +
        'no more writes until Orderly starts again. Nothing was found damaged: find out why the check could not run before ' +
        'restoring anything from a backup.',
    );
    this.name = 'StoreCheckError';
  }
}

/**
 * The store file can be read but not written (its permissions, its `-wal` or `-shm` file's, its
 * directory's, or a read-only file system). Refused at start, naming the file: it was not modified.
 */
export class StoreUnwritableError extends Error {
  constructor(
    readonly file: string,
    cause: unknown,
  ) {
    super(
      `the Orderly store at ${file} cannot be written (${cause instanceof Error ? cause.message : String(cause)}). It was not ` +
        `modified. Let this user write it, its -wal and -shm files and their directory (and check that the file system is not mounted read-only).`,
    );
    this.name = 'StoreUnwritableError';
  }
}

/**
 * The data directory held a store that is not there now (deleted or replaced). Starting afresh would
 * drop its backlog and subscriptions without a word, so it is refused; the message says how to start a
 * new store on purpose.
 */
export class StoreIdentityError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StoreIdentityError';
  }
}
