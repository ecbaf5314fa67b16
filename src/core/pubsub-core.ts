import { randomUUID } from 'node:crypto';
import { SchemaRegistry, type SchemaChange, type SchemaRecord, type TopicSchemaSettings } from '../schema/schema-registry.js';
import { DELETED_SCHEMA } from '../schema/schema-name.js';
import type { TopicSchema } from '../schema/topic-schema.js';
import type {
  CompactionPlan,
  RetainedAcks,
  SnapshotRecord,
  Store,
  StoredMessage,
  SubscriptionRecord,
  TopicRecord,
} from '../store/store.js';
import { InvalidAckIdsError, type AckResult } from './ack-results.js';
import { systemClock, type Clock } from './clock.js';
import { compactionPlan } from './compaction-plan.js';
import type { ConsumerSpec, SubscriptionHandle, SubscriptionState } from './consumer.js';
import { deadLetterAttributes } from './dead-letter.js';
import { AlreadyExistsError, FailedPreconditionError, InvalidArgumentError, NotFoundError, OrderlyError } from './errors.js';
import { checkLabels } from './labels.js';
import type { Entry } from './key-queue.js';
import { validateBatch, type ValidMessage } from './limits.js';
import { DEFAULT_MEMORY, PayloadBudget, type MemoryOptions } from './memory-budget.js';
import type { MessageInput, ReceivedMessage } from './message.js';
import { projectOf, resourceName } from './names.js';
import { pullOnce } from './pull-consumer.js';
import { PushDelivery } from './push-delivery.js';
import { FIRST_SEQ, SequenceAllocator } from './sequence-allocator.js';
import { SnapshotHoldings, type SnapshotHolding } from './snapshot-holdings.js';
import { Snapshots, type Snapshot, type SnapshotPatch } from './snapshots.js';
import { Subscriber, type MessageHandler, type SubscribeOptions } from './subscriber.js';
import { checkImmutable, normalizeSubscription, type SubscriptionInput, type SubscriptionSpec } from './subscription-config.js';
import { IamPolicies } from './iam-policies.js';
import { DEFAULT_PUSH_EGRESS, type PushEgress } from './push-egress.js';
import { SubscriptionEvents, type SubscriptionListener } from './subscription-events.js';
import type { SubscriptionMetrics } from './subscription-metrics.js';
import { SubscriptionRuntime, type RuntimeHooks } from './subscription-runtime.js';
import { PublishQueue } from './publish-queue.js';
import { ProcessKeepAlive } from './process-keep-alive.js';
import { applyTopicInput, checkTopicSchemaUse, topicSettings, type TopicInput, type TopicSettings } from './topic-config.js';
import { isAckIdForm } from './lease-manager.js';

export interface Topic extends TopicSettings {
  name: string;
  labels: Record<string, string>;
  /** Pub/Sub's topic state; Orderly's topics have no ingestion source, so always ACTIVE. */
  state: 'ACTIVE';
}

export interface Subscription extends SubscriptionSpec {
  name: string;
  state: SubscriptionState;
  /** Detached from its topic (DetachSubscription): it receives nothing and pull fails with FAILED_PRECONDITION. */
  detached: boolean;
  /** The topic's messageRetentionDuration (seconds), when it has one: how far back a seek always reaches. */
  topicMessageRetentionDuration?: number;
}

/** Who a subscription is beyond its name: what export sinks key their progress by (see SubscriptionRecord). */
export type SubscriptionIdentity = Pick<SubscriptionRecord, 'uid' | 'adoptsNameKeyedProgress'>;

export interface CoreOptions {
  store: Store;
  clock?: Clock;
  /** Project for bare ids (`orders` -> `projects/<projectId>/topics/orders`). */
  projectId?: string;
  /** How often leases and backoffs are checked, in ms. */
  tickMs?: number;
  /**
   * How often acked and expired messages are compacted away, in ms (default 30 s: a drained backlog's disk
   * goes back to the system within a minute, compaction and incremental vacuum included).
   */
  compactEveryMs?: number;
  /** Called when a background durable write fails (the affected messages will be delivered again). */
  onStoreError?: (error: unknown) => void;
  /**
   * The store turned out to be unusable after it opened (Store.onFatal: damage found by the background
   * integrity check): every write fails from now on, so a process should stop (default: logged).
   */
  onStoreFatal?: (error: Error) => void;
  /**
   * What the core keeps in memory (see MemoryOptions); the rest of every backlog stays in the store and is
   * read as it is needed, so memory is bounded by these settings, not by the backlog.
   */
  memory?: MemoryOptions;
  /** Where push subscriptions may deliver; link-local and metadata addresses are refused by default. */
  push?: PushEgress;
  /**
   * How long a push request is out unanswered before status shows it (`pushStalled`), in ms (default 30 s):
   * an endpoint that takes requests and hangs fails none until the ack deadline.
   */
  pushStallMs?: number;
}

export interface PullOptions {
  maxMessages?: number;
  /** Wait up to this long for a message when none is ready (Pub/Sub's returnImmediately=false). */
  waitMs?: number;
  /**
   * The caller stopped waiting (its call was cancelled or passed its deadline): the pull ends with what
   * it has, and leases nothing more.
   */
  signal?: AbortSignal;
}

/** Checks a subscription's settings beyond the core's own (an export section); throws InvalidArgumentError. */
export type SubscriptionValidator = (name: string, spec: SubscriptionSpec) => void;

/** What a subscription's topic reads once its topic was deleted (as in Pub/Sub). */
export const DELETED_TOPIC = '_deleted-topic_';
/** A push request out this long unanswered is shown in status (`pushStalled`), as a stalled export call is. */
const DEFAULT_PUSH_STALL_MS = 30_000;

/**
 * The ordered subscription core: topics, subscriptions, publish and delivery with Pub/Sub's semantics
 * (per-key order, one outstanding batch per key, redelivery of a key's later messages, dead letters,
 * backoff, retention, seek), durable through a `Store`. Consumers (subscribers, push, streams, export
 * runners) attach to a subscription through `attach` and act on it through the handle they get.
 */
export class PubSubCore {
  readonly projectId: string;
  readonly clock: Clock;
  private readonly store: Store;
  private readonly topics = new Map<string, TopicRecord>();
  private readonly subs = new Map<string, SubscriptionRuntime>();
  private readonly identities = new Map<string, SubscriptionIdentity>();
  private readonly pushers = new Map<string, PushDelivery>();
  /** Pushers stopped (push config removed, subscription deleted) whose requests may still be out: a close drains them too. */
  private readonly stoppedPushers = new Set<PushDelivery>();
  private readonly events: SubscriptionEvents;
  private readonly validators = new Set<SubscriptionValidator>();
  /** Messages published per existing topic since start (for metrics). */
  readonly published = new Map<string, number>();
  /** Messages compaction deleted from the store since start (for metrics). */
  private compactedMessages = 0;
  private sequences!: SequenceAllocator;
  /** Highest seq handed to the subscriptions; compaction must not pass it. */
  private fannedOutSeq = 0;
  private readonly timers: { cancel(): void }[] = [];
  private readonly onStoreError: (e: unknown) => void;
  private readonly payloads: PayloadBudget;
  private readonly window: RuntimeHooks['window'];
  /** The compaction running, if one is; never rejects (its caller is told). */
  private compacting?: Promise<void>;
  /** Each subscription's count of messages expired unread when the last compaction planned its watermark. */
  private expiredAtCompaction = new Map<string, number>();
  /** Per subscription, the seek running (seeks of one subscription run one after another). */
  private readonly seeks = new WeakMap<SubscriptionRuntime, Promise<void>>();
  private readonly pushEgress: PushEgress;
  private readonly pushStallMs: number;
  private readonly snapshots: Snapshots;
  /** What each live snapshot keeps in the store, counted as status and metrics ask. */
  private readonly holdings: SnapshotHoldings;
  private closed = false;
  private readonly keepAlive = new ProcessKeepAlive();
  private readonly publishes = new PublishQueue();
  /**
   * Topics and subscriptions whose creation is under way (stored, not yet in `topics`/`subs`): a second
   * create of one is ALREADY_EXISTS, even if the first then fails in the store (as two creates racing
   * in Pub/Sub: one of them is told the name is taken).
   */
  private readonly creating = new Set<string>();
  /** The last of the resource updates started (see oneUpdateAtATime); never rejects. */
  private updates: Promise<unknown> = Promise.resolve();
  /** SchemaService's schemas; topics' schemaSettings name them. Deleting one points its topics at `_deleted-schema_`. */
  schemas!: SchemaRegistry;
  /** Stored IAM policies (see IamPolicies: kept and returned, not enforced). */
  readonly iam: IamPolicies;

  private constructor(options: CoreOptions) {
    this.store = options.store;
    this.clock = options.clock ?? systemClock;
    this.projectId = options.projectId ?? 'orderly';
    this.onStoreError = options.onStoreError ?? ((e) => console.error('orderly: durable write failed:', e));
    this.events = new SubscriptionEvents((e) => console.error('orderly: a subscription listener failed:', e));
    // A setting given as undefined (a job file leaving it out) is the default too.
    const memory = { ...DEFAULT_MEMORY, ...Object.fromEntries(Object.entries(options.memory ?? {}).filter(([, v]) => v !== undefined)) };
    this.payloads = new PayloadBudget(memory.payloadBytes);
    this.window = {
      messages: memory.messagesPerSubscription,
      perKey: Math.min(memory.messagesPerKey, memory.messagesPerSubscription),
      of: options.memory?.windowOf,
    };
    this.pushEgress = options.push ?? DEFAULT_PUSH_EGRESS;
    this.pushStallMs = options.pushStallMs ?? DEFAULT_PUSH_STALL_MS;
    this.snapshots = new Snapshots(this.store, this.clock, this.projectId);
    this.holdings = new SnapshotHoldings(this.store);
    this.iam = new IamPolicies(this.store);
  }

  /** Loads topics and subscriptions; backlogs are read lazily, a window at a time. */
  static async open(options: CoreOptions): Promise<PubSubCore> {
    const core = new PubSubCore(options);
    options.store.onFatal(options.onStoreFatal ?? ((e) => console.error(`orderly: ${e.message}`)));
    await core.load();
    core.timers.push(core.clock.setInterval(() => core.tick(), options.tickMs ?? 100));
    core.timers.push(core.clock.setInterval(() => core.compactInBackground(), options.compactEveryMs ?? 30_000));
    return core;
  }

  private async load(): Promise<void> {
    const lastSeq = await this.store.lastSeq();
    this.fannedOutSeq = lastSeq;
    this.sequences = new SequenceAllocator(this.store, this.clock, lastSeq);
    for (const t of await this.store.listTopics()) this.topics.set(t.name, t);
    const records = (await this.store.listSchemas()).map((row) => row.record as SchemaRecord);
    this.schemas = new SchemaRegistry({ records, clock: this.clock, persist: (change) => this.persistSchema(change) });
    await this.iam.load();
    for (const rec of await this.store.listSubscriptions()) this.startRuntime(rec);
    await this.snapshots.load();
  }

  /**
   * A schema change made durable (the registry applies it once this resolves). A deleted schema's topics
   * are pointed at `_deleted-schema_` first, as Pub/Sub does, and its IAM policy goes.
   */
  private persistSchema(change: SchemaChange): Promise<void> {
    this.checkOpen();
    if (change.kind === 'put') return this.store.putSchema({ name: change.record.name, record: change.record });
    // Its topics change as an update of theirs would: a topic update started before it must not write back
    // the schema's name after this.
    return this.oneUpdateAtATime(async () => {
      for (const rec of this.topics.values()) {
        const settings = topicSettings(rec.settings);
        if (settings.schemaSettings?.schema !== change.name) continue;
        rec.settings = { ...settings, schemaSettings: { ...settings.schemaSettings, schema: DELETED_SCHEMA } };
        await this.store.updateTopic(rec);
      }
      await this.store.deleteSchema(change.name);
      await this.iam.drop(change.name);
    });
  }

  /**
   * A subscription's delivery state, reading its backlog from `rec.lowSeq` on. For an ordering key,
   * delivery resumes at its first unacked message and every later one is delivered again, acked or not:
   * the redelivery rule, applied to the deliveries a restart interrupted (see BacklogReader).
   */
  private startRuntime(rec: SubscriptionRecord): SubscriptionRuntime {
    const runtime = new SubscriptionRuntime(
      rec.name,
      rec.spec as SubscriptionSpec,
      rec.topicUid,
      {
        clock: this.clock,
        store: this.store,
        deadLetter: (rt, entry) => this.deadLetter(rt, entry),
        onStoreError: this.onStoreError,
        payloads: this.payloads,
        window: this.window,
      },
      rec.lowSeq,
      this.sequences.last,
    );
    this.subs.set(rec.name, runtime);
    this.identities.set(rec.name, { uid: rec.uid, adoptsNameKeyedProgress: rec.adoptsNameKeyedProgress });
    runtime.acksRetainedAfter = rec.acksRetainedAfter;
    if (rec.detached) {
      runtime.detached = true;
      runtime.close(detachedError(rec.name));
    }
    this.syncPush(runtime);
    return runtime;
  }

  /** Starts or stops the push worker to match the subscription's pushConfig (a detached one pushes nothing). */
  private syncPush(runtime: SubscriptionRuntime): void {
    const wantsPush = this.subs.get(runtime.name) === runtime && runtime.spec.pushConfig !== undefined && !runtime.detached;
    const pusher = this.pushers.get(runtime.name);
    if (wantsPush && !pusher)
      this.pushers.set(runtime.name, new PushDelivery((spec) => runtime.attach(spec), this.pushEgress, this.onStoreError));
    if (!wantsPush && pusher) {
      pusher.stop();
      this.pushers.delete(runtime.name);
      this.stoppedPushers.add(pusher);
      void pusher.settled().then(() => this.stoppedPushers.delete(pusher));
    }
  }

  // ---- topics ----

  topicName(ref: string, field = 'topic'): string {
    return resourceName('topics', ref, this.projectId, field);
  }

  subscriptionName(ref: string, field = 'subscription'): string {
    return resourceName('subscriptions', ref, this.projectId, field);
  }

  async createTopic(ref: string, input: TopicInput = {}): Promise<Topic> {
    this.checkOpen();
    const name = this.topicName(ref, 'name');
    const { labels, settings } = applyTopicInput({ labels: {}, settings: {} }, input, (v, f) => this.schemas.checkTopicSettings(v, f));
    if (this.topics.has(name) || this.creating.has(name)) throw new AlreadyExistsError('Topic', name);
    this.creating.add(name);
    try {
      const rec = await this.store.createTopic(name, labels, settings);
      this.sequences.created(rec.uid);
      this.topics.set(name, rec);
      return describeTopic(rec);
    } finally {
      this.creating.delete(name);
    }
  }

  getTopic(ref: string): Topic {
    return describeTopic(this.topicRecord(ref));
  }

  hasTopic(ref: string): boolean {
    return this.topics.has(this.topicName(ref));
  }

  /** Changes the fields `patch` gives (`null` clears one); the rest stay as they are. */
  updateTopic(ref: string, patch: TopicInput): Promise<Topic> {
    return this.oneUpdateAtATime(async () => {
      const rec = this.topicRecord(ref);
      const next = applyTopicInput({ labels: rec.labels, settings: topicSettings(rec.settings) }, patch, (v, f) =>
        this.schemas.checkTopicSettings(v, f),
      );
      await this.store.updateTopic({ ...rec, ...next });
      rec.labels = next.labels;
      rec.settings = next.settings;
      return describeTopic(rec);
    });
  }

  /**
   * Runs `update` once the resource updates started before it have ended, so it computes its change from
   * what they left. Started together, two updates of different fields (labels, then retention) both read
   * the same state and the second to finish wrote back what the first had changed, in memory and store.
   */
  private oneUpdateAtATime<T>(update: () => Promise<T>): Promise<T> {
    const run = this.updates.then(update);
    this.updates = run.catch(() => undefined);
    return run;
  }

  /** The project's topics, by name. */
  listTopics(project = this.projectId): Topic[] {
    return [...this.topics.values()]
      .filter((t) => projectOf(t.name) === project)
      .sort((a, b) => (a.name < b.name ? -1 : 1))
      .map(describeTopic);
  }

  /** Deletes the topic; its subscriptions stay (topic shown as `_deleted-topic_`) and keep their backlog. */
  async deleteTopic(ref: string): Promise<void> {
    const rec = this.topicRecord(ref);
    await this.store.deleteTopic(rec.uid);
    this.topics.delete(rec.name);
    // Its publish count goes too: /metrics listed every topic ever deleted (a series and a map entry each, for good).
    this.published.delete(rec.name);
    await this.iam.drop(rec.name);
  }

  /** The topic's subscriptions, by name. */
  listTopicSubscriptions(ref: string): string[] {
    const rec = this.topicRecord(ref);
    return [...this.subs.values()]
      .filter((s) => s.topicUid === rec.uid)
      .map((s) => s.name)
      .sort();
  }

  /**
   * The topic's schema as an export reads it, resolved now (it follows UpdateTopic and the schema's
   * revisions). Without schemaSettings now (cleared, the schema deleted, or the topic deleted) it has no
   * `current`, but still reads a message by the revision it names.
   */
  topicSchema(ref: string): TopicSchema {
    // A subscription's topic may read `_deleted-topic_`, which is no topic name.
    const rec = this.topics.get(ref) ?? (ref.includes('/') ? undefined : this.topics.get(`projects/${this.projectId}/topics/${ref}`));
    const settings: TopicSchemaSettings | undefined = rec ? topicSettings(rec.settings).schemaSettings : undefined;
    const schemas = this.schemas;
    const revision = (schemaName: string, revisionId: string) => schemas.compiledRevision(schemaName, revisionId);
    if (!settings || settings.schema === DELETED_SCHEMA || !schemas.has(settings.schema)) return { revision };
    return {
      current: {
        schema: settings.schema,
        type: schemas.get(settings.schema, 'BASIC').type,
        encoding: settings.encoding,
        revisions: schemas.revisionsInRange(settings),
      },
      revision,
    };
  }

  private topicRecord(ref: string): TopicRecord {
    this.checkOpen();
    const name = this.topicName(ref);
    const rec = this.topics.get(name);
    if (!rec) throw new NotFoundError('Topic', name);
    return rec;
  }

  // ---- subscriptions ----

  /** Registers a check run on every created or updated subscription (export sections: the export manager). */
  addSubscriptionValidator(validator: SubscriptionValidator): () => void {
    this.validators.add(validator);
    return () => this.validators.delete(validator);
  }

  /** Told of every subscription created, updated or deleted, once the change is durable. */
  onSubscriptionChange(listener: SubscriptionListener): () => void {
    return this.events.on(listener);
  }

  async createSubscription(ref: string, input: SubscriptionInput): Promise<Subscription> {
    this.checkOpen();
    const name = this.subscriptionName(ref, 'name');
    const spec = normalizeSubscription(input, (t, field) => this.topicName(t, field));
    checkLabels(spec.labels);
    if (this.subs.has(name) || this.creating.has(name)) throw new AlreadyExistsError('Subscription', name);
    const topic = this.topics.get(spec.topic);
    if (!topic) throw new NotFoundError('Topic', spec.topic);
    this.checkDeadLetterTopic(spec);
    checkTopicSchemaUse(spec, topic.name, topicSettings(topic.settings), DELETED_SCHEMA);
    for (const validate of this.validators) validate(name, spec);
    // Delivery starts with messages published after creation: everything up to now is below the watermark.
    const rec: SubscriptionRecord = {
      name,
      uid: randomUUID(),
      adoptsNameKeyedProgress: false,
      topicUid: topic.uid,
      spec,
      lowSeq: this.fannedOutSeq,
      detached: false,
      // Its retention, if any, keeps what it acks from now on: nothing published before it was its own.
      acksRetainedAfter: this.fannedOutSeq,
    };
    this.creating.add(name);
    try {
      await this.store.createSubscription(rec);
    } finally {
      this.creating.delete(name);
    }
    this.startRuntime(rec);
    this.events.emit({ type: 'created', subscription: name });
    return this.getSubscription(name);
  }

  private checkDeadLetterTopic(spec: SubscriptionSpec): void {
    const dlt = spec.deadLetterPolicy?.deadLetterTopic;
    if (dlt && !this.topics.has(dlt)) throw new NotFoundError('Dead-letter topic', dlt);
  }

  getSubscription(ref: string): Subscription {
    const rt = this.runtime(ref);
    const subscription: Subscription = { name: rt.name, ...this.describeSpec(rt), state: rt.state, detached: rt.detached };
    const retention = this.topicRetention(rt);
    if (retention !== undefined) subscription.topicMessageRetentionDuration = retention;
    return subscription;
  }

  /** The messageRetentionDuration of the subscription's topic (not of a topic created again under its name), if it has one. */
  private topicRetention(rt: SubscriptionRuntime): number | undefined {
    const topic = this.topics.get(rt.spec.topic);
    return topic?.uid === rt.topicUid ? topicSettings(topic.settings).messageRetentionDuration : undefined;
  }

  private describeSpec(rt: SubscriptionRuntime): SubscriptionSpec {
    return { ...rt.spec, topic: this.topicLive(rt) ? rt.spec.topic : DELETED_TOPIC };
  }

  /** A topic deleted and created again under the same name is another topic (another uid). */
  private topicLive(rt: SubscriptionRuntime): boolean {
    return this.topics.get(rt.spec.topic)?.uid === rt.topicUid;
  }

  hasSubscription(ref: string): boolean {
    return this.subs.has(this.subscriptionName(ref));
  }

  /** The subscription's identity; a subscription created again under the same name has another uid. */
  identity(ref: string): SubscriptionIdentity {
    const name = this.subscriptionName(ref);
    const identity = this.identities.get(name);
    if (!identity) throw new NotFoundError('Subscription', name);
    return identity;
  }

  listSubscriptions(project = this.projectId): Subscription[] {
    return this.allSubscriptions().filter((s) => projectOf(s.name) === project);
  }

  /** Every project's subscriptions, by name (exports and status cover them all). */
  allSubscriptions(): Subscription[] {
    return [...this.subs.values()].sort((a, b) => (a.name < b.name ? -1 : 1)).map((s) => this.getSubscription(s.name));
  }

  /** Changes the mutable fields given in `patch`; ordering, filter and topic are fixed at creation. */
  updateSubscription(ref: string, patch: Partial<SubscriptionInput>): Promise<Subscription> {
    return this.oneUpdateAtATime(async () => {
      const rt = this.runtime(ref);
      // A spec is a valid input (durations in seconds), so the merge is validated as a whole.
      const merged: SubscriptionInput = { ...rt.spec, ...patch, topic: patch.topic ?? rt.spec.topic };
      const next = normalizeSubscription(merged, (t, field) => this.topicName(t, field), { existing: rt.spec });
      // Only labels given now: ones stored before Orderly checked labels stay as they are until changed.
      if (patch.labels !== undefined) checkLabels(next.labels);
      checkImmutable(rt.spec, next);
      // Only a change of the policy checks its topic: one deleted since must not block every other change.
      if (patch.deadLetterPolicy !== undefined) this.checkDeadLetterTopic(next);
      const topic = this.topics.get(next.topic);
      if (topic?.uid === rt.topicUid) checkTopicSchemaUse(next, topic.name, topicSettings(topic.settings), DELETED_SCHEMA);
      for (const validate of this.validators) validate(rt.name, next);
      // Retention begun now keeps what is acked from now on; what is acked already is gone for it. The acked
      // prefix is the runtime's (everything below what it may still deliver): the store's watermark moves
      // only when compaction runs, and acks above it would otherwise come back on a seek.
      if (next.retainAckedMessages && !rt.spec.retainAckedMessages) {
        const held = rt.detached ? undefined : rt.lowestHeldSeq();
        rt.acksRetainedAfter = held === undefined ? this.fannedOutSeq : held - 1;
        await this.store.updateSubscriptionSpec(rt.name, next, rt.acksRetainedAfter);
      } else await this.store.updateSubscriptionSpec(rt.name, next);
      rt.spec = next;
      const refusal = pullRefusal(rt);
      if (refusal) rt.endPulls(refusal);
      this.syncPush(rt);
      this.events.emit({ type: 'updated', subscription: rt.name });
      return this.getSubscription(rt.name);
    });
  }

  async deleteSubscription(ref: string): Promise<void> {
    const rt = this.runtime(ref);
    rt.close();
    this.subs.delete(rt.name);
    this.identities.delete(rt.name);
    this.syncPush(rt);
    await this.store.deleteSubscription(rt.name);
    await this.iam.drop(rt.name);
    this.events.emit({ type: 'deleted', subscription: rt.name });
  }

  /**
   * Detaches the subscription from its topic, as Pub/Sub's DetachSubscription: it stays (listed, with
   * `detached: true`) but its backlog is dropped and nothing more reaches it; pull and streaming pull fail
   * with FAILED_PRECONDITION, push stops, and so does its export (the export manager follows the
   * 'updated' event). Detaching a detached subscription changes nothing.
   */
  async detachSubscription(ref: string): Promise<void> {
    const rt = this.runtime(ref);
    if (rt.detached) return;
    // Closed first, so no ack of a delivery still out lands after the backlog is dropped.
    rt.detached = true;
    rt.close(detachedError(rt.name));
    this.syncPush(rt);
    await this.store.detachSubscription(rt.name, this.fannedOutSeq);
    this.events.emit({ type: 'updated', subscription: rt.name });
  }

  /** For export connectors: reflect the sink's health in the subscription's `state`. */
  setSubscriptionState(ref: string, state: SubscriptionState): void {
    this.runtime(ref).state = state;
  }

  private runtime(ref: string): SubscriptionRuntime {
    this.checkOpen();
    const name = this.subscriptionName(ref);
    const rt = this.subs.get(name);
    if (!rt) throw new NotFoundError('Subscription', name);
    return rt;
  }

  // ---- publish ----

  /**
   * Publishes a batch; resolves with the message ids once the messages are durable. Messages are
   * delivered only after that, so a delivered message always survives a crash.
   */
  publish(topicRef: string, inputs: MessageInput[]): Promise<string[]> {
    return this.publishes.run(() => this.publishNow(topicRef, inputs));
  }

  private async publishNow(topicRef: string, inputs: MessageInput[]): Promise<string[]> {
    const topic = this.topicRecord(topicRef);
    const messages = validateBatch(inputs);
    const schema = topicSettings(topic.settings).schemaSettings;
    if (schema) {
      // Every message is checked before any is appended: a publish is accepted or refused whole.
      const stamped = messages.map((m, i) => ({
        ...m,
        attributes: { ...m.attributes, ...this.schemas.validateForTopic(schema, m.data, i).attributes },
      }));
      return this.append(topic, stamped);
    }
    return this.append(topic, messages);
  }

  private async append(topic: TopicRecord, messages: ValidMessage[]): Promise<string[]> {
    this.checkOpen();
    // Sequences are handed out synchronously, in call order, so key order = publish order; appends
    // commit in that order too (the store's writer keeps submission order).
    const stored = this.sequences.allocate(topic.uid, messages);
    await this.store.append(stored);
    this.sequences.committed(stored[stored.length - 1]!.seq);
    this.published.set(topic.name, (this.published.get(topic.name) ?? 0) + stored.length);
    this.fanOut(topic.uid, stored);
    return stored.map((m) => String(m.seq));
  }

  private fanOut(topicUid: number, messages: StoredMessage[]): void {
    for (const rt of this.subs.values()) {
      if (rt.topicUid !== topicUid) continue;
      for (const m of messages) rt.offer(m);
    }
    this.fannedOutSeq = Math.max(this.fannedOutSeq, messages[messages.length - 1]!.seq);
  }

  private deadLetter(source: SubscriptionRuntime, entry: Entry): Promise<void> | false {
    const dltName = source.spec.deadLetterPolicy?.deadLetterTopic;
    const dlt = dltName ? this.topics.get(dltName) : undefined;
    if (!dlt) return false;
    const m = source.withPayload(entry);
    if (!m) return false;
    let attributes = deadLetterAttributes(source.name, m, entry.failures, entry.lastError);
    // Publish limits do not apply to dead-lettering, as in Pub/Sub, but the dead-letter topic's schema does:
    // its subscribers are promised conforming messages stamped with the schema revision (the exports decode
    // by it). A message that does not conform stays in its subscription and is retried, as when the
    // dead-letter topic is gone.
    const schema = topicSettings(dlt.settings).schemaSettings;
    if (schema) {
      const stamp = this.schemaStamp(schema, m.data);
      if (!stamp) return false;
      attributes = { ...attributes, ...stamp };
    }
    return this.append(dlt, [{ data: m.data, attributes, orderingKey: m.orderingKey }]).then(() => undefined);
  }

  /** The schema attributes `data` gets on a topic with `schema`; undefined if it does not conform (or the schema is deleted). */
  private schemaStamp(schema: TopicSchemaSettings, data: Buffer): Record<string, string> | undefined {
    try {
      return this.schemas.validateForTopic(schema, data).attributes;
    } catch (e) {
      if (e instanceof OrderlyError && (e.code === 'INVALID_ARGUMENT' || e.code === 'NOT_FOUND')) return undefined;
      throw e;
    }
  }

  // ---- delivery ----

  /**
   * Attaches a consumer to a subscription: it receives deliveries as they become ready (within its room)
   * and settles them through the returned handle. See `ConsumerSpec` and `SubscriptionHandle`.
   */
  attach(subRef: string, consumer: ConsumerSpec): SubscriptionHandle {
    return this.runtime(subRef).attach(consumer);
  }

  /** A pull consumer (StreamingPull); see `attach`. Refused on push and export subscriptions (see `pullable`). */
  attachPull(subRef: string, consumer: ConsumerSpec): SubscriptionHandle {
    return this.pullable(subRef).attach(consumer, true);
  }

  /** Pull: up to maxMessages ready messages; a key's messages come in order and only one batch per key is out. */
  async pull(subRef: string, options: PullOptions = {}): Promise<ReceivedMessage[]> {
    return pullOnce(this.pullable(subRef), options.maxMessages ?? 100, options.waitMs ?? 0, options.signal);
  }

  /**
   * Gives back pulled messages whose answer was never sent (the call was gone): deliverable again at once,
   * with no delivery attempt counted (see SubscriptionRuntime.release).
   */
  release(subRef: string, ackIds: string[]): void {
    this.runtime(subRef).release(ackIds);
  }

  /**
   * Refuses ids that no subscription could have issued (malformed), naming the first as `field[i]`, as
   * Pub/Sub refuses them ("an invalid ack ID"); ids that are well formed but stale pass. Not on an
   * exactly-once subscription: there every invalid id, malformed or stale, is named in the answer
   * (InvalidAckIdsError, a stream's confirmations) while the valid ones are settled, as its clients expect.
   */
  checkAckIds(subRef: string, ackIds: readonly string[], field: string): void {
    if (this.runtime(subRef).exactlyOnce) return;
    const bad = ackIds.findIndex((id) => !isAckIdForm(id));
    if (bad >= 0) throw new InvalidArgumentError(`${field}[${bad}]`, `is not an ack id this server issued: ${JSON.stringify(ackIds[bad])}`);
  }

  /**
   * Acks the ids whose lease is still valid, durably. Others are ignored, as Pub/Sub does — except on an
   * exactly-once subscription, where they fail the call with InvalidAckIdsError (after the valid ones were acked).
   */
  async acknowledge(subRef: string, ackIds: string[]): Promise<AckResult> {
    const rt = this.runtime(subRef);
    return exactlyOnceResult(rt, await rt.acknowledge(ackIds));
  }

  /** 0 = nack. `error` says why (export connectors), carried to the dead-letter topic. Invalid ids: as `acknowledge`. */
  async modifyAckDeadline(subRef: string, ackIds: string[], seconds: number, error?: string): Promise<AckResult> {
    const rt = this.runtime(subRef);
    return exactlyOnceResult(rt, rt.modifyAckDeadline(ackIds, seconds, error));
  }

  /** Streaming/callback delivery; see `Subscriber`. */
  subscribe(subRef: string, handler: MessageHandler, options: SubscribeOptions = {}): Subscriber {
    const runtime = this.pullable(subRef);
    const release = this.keepAlive.hold();
    try {
      return new Subscriber((spec) => runtime.attach(spec, true), handler, options, release);
    } catch (e) {
      release();
      throw e;
    }
  }

  /** Messages published before `time` become acked, later ones unacked (if still retained). */
  async seek(subRef: string, time: Date | number): Promise<void> {
    const rt = this.attachable(subRef);
    const at = typeof time === 'number' ? time : time.getTime();
    // An invalid Date (a time parsed from bad input) is NaN, which the store's comparisons took as "before
    // nothing": the seek went through and made every retained message unacked.
    if (!Number.isFinite(at))
      throw new InvalidArgumentError('time', `must be a valid Date or milliseconds since the epoch, got ${String(time)}`);
    // The store waits for queued acks to land first; deliveries still out end now (suspendForSeek).
    await this.seeking(rt, async () => {
      // A compaction in flight would raise the watermark the seek lowers.
      await this.compacting;
      return this.store.seek(this.record(rt), at, this.retainedAcks(rt));
    });
  }

  /**
   * Runs a seek of `rt` in the store (`seek` resolves with the seq the backlog is read again from, or
   * undefined if the seek's target is gone): the leases out end as it begins, so no ack that arrives
   * meanwhile lands after it. A seek that fails reads the backlog again from where it was.
   *
   * The seeks of one subscription run one after another: a seek that failed while another ran read the
   * backlog again from where it was before that one, so its replay was not delivered until a restart.
   */
  private async seeking(rt: SubscriptionRuntime, seek: () => Promise<number | undefined>): Promise<boolean> {
    const before = this.seeks.get(rt);
    // Without one running, the leases end in this call: an ack sent right after it is already stale.
    const run = before ? before.then(() => this.seekNow(rt, seek)) : this.seekNow(rt, seek);
    const done = run.then(
      () => undefined,
      () => undefined,
    );
    this.seeks.set(rt, done);
    try {
      return await run;
    } finally {
      if (this.seeks.get(rt) === done) this.seeks.delete(rt);
    }
  }

  private async seekNow(rt: SubscriptionRuntime, seek: () => Promise<number | undefined>): Promise<boolean> {
    const resumeFrom = rt.suspendForSeek();
    let lowSeq: number | undefined;
    try {
      lowSeq = await seek();
    } finally {
      rt.reset(lowSeq ?? resumeFrom, this.sequences.last);
    }
    return lowSeq !== undefined;
  }

  /**
   * Which acked messages a seek back can replay: those within the subscription's messageRetentionDuration
   * that it acked while it retainAckedMessages, and those within its topic's messageRetentionDuration when
   * the topic has one (even from before the subscription existed, as Pub/Sub's topic retention allows).
   */
  private retainedAcks(rt: SubscriptionRuntime): RetainedAcks {
    const now = this.clock.now();
    const topicRetention = this.topicRetention(rt);
    return {
      topicSince: topicRetention !== undefined ? now - topicRetention * 1000 : Infinity,
      subscriptionSince: rt.spec.retainAckedMessages ? now - rt.spec.messageRetentionDuration * 1000 : Infinity,
    };
  }

  /**
   * Gives the subscription exactly the snapshot's acknowledgement state: what the snapshot holds unacked
   * is delivered again (on an ordered subscription per key in order, with the redelivery rule: an acked
   * message after an unacked one of its key comes again too, unless the subscription is exactly-once).
   * The snapshot must be of the subscription's topic (FAILED_PRECONDITION otherwise).
   */
  async seekToSnapshot(subRef: string, snapshotRef: string): Promise<void> {
    const rt = this.attachable(subRef);
    const snapshot = this.snapshots.get(snapshotRef);
    if (snapshot.topicUid !== rt.topicUid) {
      throw new FailedPreconditionError(
        `snapshot ${snapshot.name} is of topic ${this.topicNameOf(snapshot.topicUid)} and subscription ${rt.name} of ${this.describeSpec(rt).topic}: a subscription can only seek to a snapshot of its own topic`,
      );
    }
    const found = await this.seeking(rt, async () => {
      await this.compacting;
      return this.store.seekToSnapshot(this.record(rt), snapshot.uid);
    });
    if (!found) throw new NotFoundError('Snapshot', snapshot.name);
  }

  /**
   * A subscription consumers pull from, as Pub/Sub has it: Pull and StreamingPull are refused on a push
   * subscription (its endpoint gets the messages) and on an export subscription (its sink does: a pull
   * would take them away from it).
   */
  private pullable(subRef: string): SubscriptionRuntime {
    const rt = this.runtime(subRef);
    const refusal = pullRefusal(rt);
    if (refusal) throw refusal;
    return rt;
  }

  /** The subscription's runtime, if it can deliver: FAILED_PRECONDITION once detached. */
  private attachable(subRef: string): SubscriptionRuntime {
    const rt = this.runtime(subRef);
    if (rt.detached) throw detachedError(rt.name);
    return rt;
  }

  private record(rt: SubscriptionRuntime): SubscriptionRecord {
    return {
      name: rt.name,
      ...this.identity(rt.name),
      topicUid: rt.topicUid,
      spec: rt.spec,
      lowSeq: 0,
      detached: rt.detached,
      acksRetainedAfter: rt.acksRetainedAfter,
    };
  }

  // ---- snapshots ----

  /**
   * Takes a snapshot of the subscription's acknowledgement state (Pub/Sub's CreateSnapshot): every message
   * unacked now, plus everything published to its topic from now on. It lives 7 days from the oldest
   * message it holds; refused (FAILED_PRECONDITION) if that leaves less than an hour. An empty `ref` gets a
   * generated name, as over gRPC in Pub/Sub.
   */
  async createSnapshot(ref: string, options: { subscription: string; labels?: Record<string, string> }): Promise<Snapshot> {
    if (ref !== '') this.snapshots.name(ref, 'name');
    const rt = this.attachable(options.subscription);
    if (!this.topicLive(rt))
      throw new FailedPreconditionError(`the topic of subscription ${rt.name} was deleted: a snapshot holds messages of a topic`);
    // A compaction planned before the snapshot existed must not run alongside it.
    await this.compacting;
    const source = { name: rt.name, topicUid: rt.topicUid, retentionSeconds: rt.spec.messageRetentionDuration };
    const created = await this.snapshots.create(ref, source, options.labels);
    // A snapshot of this name that expired may have left its policy (expired ones are swept later): a new one starts empty.
    await this.iam.drop(created.name);
    return this.describeSnapshot(created);
  }

  getSnapshot(ref: string): Snapshot {
    return this.describeSnapshot(this.snapshots.get(ref));
  }

  /** The project's snapshots, by name. */
  listSnapshots(project = this.projectId): Snapshot[] {
    return this.snapshots.list(project).map((s) => this.describeSnapshot(s));
  }

  /** The names of the topic's snapshots, in order. */
  listTopicSnapshots(topicRef: string): string[] {
    return this.snapshots.ofTopic(this.topicRecord(topicRef).uid).map((s) => s.name);
  }

  /** Changes the labels and/or expireTime `patch` gives (see Snapshots.update). */
  updateSnapshot(ref: string, patch: SnapshotPatch): Promise<Snapshot> {
    this.checkOpen();
    return this.oneUpdateAtATime(async () => this.describeSnapshot(await this.snapshots.update(ref, patch)));
  }

  /** Deletes the snapshot; what only it held becomes subject to compaction. Its IAM policy goes too. */
  async deleteSnapshot(ref: string): Promise<void> {
    this.checkOpen();
    const name = this.snapshots.get(ref).name;
    await this.snapshots.delete(ref);
    await this.iam.drop(name);
  }

  /** Whether a live (not expired) snapshot of this name exists. */
  hasSnapshot(ref: string): boolean {
    try {
      this.snapshots.get(ref);
      return true;
    } catch (e) {
      if (e instanceof NotFoundError) return false;
      throw e;
    }
  }

  snapshotName(ref: string, field = 'snapshot'): string {
    return this.snapshots.name(ref, field);
  }

  /**
   * Every live snapshot (every project's) with what it keeps in the store, and when it expires and lets
   * it go. `budget`: messages the first counts of snapshots not counted yet may read now (SnapshotHoldings);
   * Infinity counts them whole (a one-off report).
   */
  snapshotHoldings(budget: number): (Snapshot & SnapshotHolding)[] {
    const live = this.snapshots.all();
    const holdings = this.holdings.read(live, this.fannedOutSeq, budget);
    return live.map((rec) => ({ ...this.describeSnapshot(rec), ...holdings.get(rec.uid)! }));
  }

  private describeSnapshot(rec: SnapshotRecord): Snapshot {
    return { name: rec.name, topic: this.topicNameOf(rec.topicUid), expireTime: rec.expireTime, labels: { ...rec.labels } };
  }

  private topicNameOf(uid: number): string {
    for (const t of this.topics.values()) if (t.uid === uid) return t.name;
    return DELETED_TOPIC;
  }

  metrics(subRef: string, topN?: number): SubscriptionMetrics {
    return this.runtime(subRef).metrics(topN);
  }

  /** While push requests of the subscription (full name) have been out unanswered for `pushStallMs` or more: how many, how long. */
  pushStalled(name: string): string | undefined {
    return this.pushers.get(name)?.unanswered(this.pushStallMs);
  }

  /**
   * Counts what is left of every subscription's backlog of this start at once (it is counted in the
   * background, a range a turn, and until then `backlogMessages` is an upper bound): for a one-shot report
   * such as offline status, which may block for it (~0.1 s per million messages; ~5 s on a filtered
   * subscription, whose count applies the filter to each message's attributes). With `hotKeys`, also
   * each one's hottest keys still in the store (for `metrics().topKeys`; ~0.3 s per million more).
   * Messages past a subscription's retention are passed first (~0.35 s per million), as a running core
   * passes them a step a turn: they are not in its backlog.
   */
  countBacklogs(hotKeys = 0): void {
    for (const s of this.subs.values()) s.countBacklog(hotKeys);
  }

  /**
   * What compaction deleted since start, and the store's size on disk now (when the store can tell): a
   * drained backlog leaves the store only as compaction gets to it, a chunk at a time.
   */
  storeUse(): { compactedMessages: number; diskBytes?: number } {
    return { compactedMessages: this.compactedMessages, diskBytes: this.store.diskBytes?.() };
  }

  /** Payload bytes held in memory by every subscription together, and the limit (CoreOptions.memory). */
  memoryUse(): { payloadBytes: number; payloadLimit: number } {
    return { payloadBytes: this.payloads.inUse, payloadLimit: this.payloads.limit };
  }

  /** Resolves once every store write issued so far (publishes, acks, failure counts) has committed. */
  flushed(): Promise<void> {
    this.publishes.drain();
    return this.store.flush();
  }

  tick(): void {
    for (const rt of this.subs.values()) rt.tick();
  }

  /**
   * Drops what no subscription can be given again (acked by all, or past retention), on the store's writer
   * thread. One compaction at a time; a call while one runs waits for it and then runs its own.
   */
  compact(): Promise<{ deletedMessages: number }> {
    if (this.closed) return Promise.reject(closedError());
    const run = (this.compacting ?? Promise.resolve()).then(() => this.compactNow());
    // The caller gets the failure; the tracking promise must not reject too, or a failed compaction (a
    // full disk) would be an unhandled rejection that ends the process, whatever `onStoreError` does.
    const untrack = () => {
      if (this.compacting === tracked) this.compacting = undefined;
    };
    const tracked = run.then(untrack, untrack);
    this.compacting = tracked;
    return run;
  }

  /** Expired snapshots are deleted first. */
  private async compactNow(): Promise<{ deletedMessages: number }> {
    if (await this.snapshots.sweep())
      await this.iam.dropWhere((resource) => resource.includes('/snapshots/') && !this.hasSnapshot(resource));
    const expired = new Map([...this.subs.values()].map((rt) => [rt.name, rt.counters.retentionExpired]));
    const result = await this.store.compact(this.compactionPlan());
    this.expiredAtCompaction = expired;
    this.compactedMessages += result.deletedMessages;
    return result;
  }

  /**
   * What no subscription can be given again, now; a detached subscription holds nothing. One a seek is
   * under way on holds everything of its topic (within its retention) and keeps its stored watermark: its
   * runtime still shows where it was before the seek, and a compaction planned from that, landing after the
   * seek's transaction, raised the watermark back and deleted the acks the seek had set (after a restart
   * the replay was gone).
   */
  private compactionPlan(): CompactionPlan {
    const views = [...this.subs.values()].map((rt) => ({
      name: rt.name,
      topicUid: rt.topicUid,
      retainAckedMessages: rt.spec.retainAckedMessages && !rt.detached,
      messageRetentionDuration: rt.detached ? 0 : rt.spec.messageRetentionDuration,
      lowestHeldSeq: () => (rt.detached ? undefined : this.seeks.has(rt) ? FIRST_SEQ : rt.lowestHeldSeq()),
      expiredBefore: rt.detached ? Infinity : rt.expiredBefore,
    }));
    const topics = [...this.topics.values()].map((t) => ({
      uid: t.uid,
      messageRetentionDuration: topicSettings(t.settings).messageRetentionDuration,
    }));
    return compactionPlan(views, topics, this.fannedOutSeq, this.clock.now(), this.snapshots.holds());
  }

  private compactInBackground(): void {
    if (this.compacting || this.closed) return;
    this.compact().catch(this.onStoreError);
  }

  /** Stops timers and closes the store; everything acknowledged so far is durable. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.publishes.drain();
    this.closed = true;
    for (const t of this.timers) t.cancel();
    await Promise.all([...this.pushers.values(), ...this.stoppedPushers].map((p) => p.drain()));
    await this.compacting;
    await this.saveWatermarks();
    for (const rt of this.subs.values()) rt.close(closedError());
    // Subscribers left open deliver nothing more: they no longer hold the process.
    this.keepAlive.releaseAll();
    await this.store.close();
  }

  /**
   * Messages expired unread since the last compaction moved only the backlog's cursor in memory: a
   * restart would read them again (and deliver them, had the retention been raised since). Their
   * watermarks are stored now; the messages are left for the next compaction to delete, which a stop
   * does not wait for. A store that cannot write (a full disk) keeps the watermarks the last compaction
   * stored, as after a kill. Only then: storing waits for the store's whole-file check, which a stop
   * otherwise cuts short.
   */
  private async saveWatermarks(): Promise<void> {
    const expiredSince = [...this.subs.values()].some((rt) => rt.counters.retentionExpired > (this.expiredAtCompaction.get(rt.name) ?? 0));
    if (!expiredSince) return;
    // A seek under way lowers its subscription's watermark in the store: the plan does not raise it.
    await this.store
      .compact({ watermarks: this.compactionPlan().watermarks, topics: new Map(), keepFromSeq: new Map() })
      .catch(() => undefined);
  }

  /**
   * Every use of a closed core fails with FAILED_PRECONDITION saying so: not NOT_FOUND for a subscription
   * that exists, nor the closed store's untyped error, nor (an ack) a quiet "invalid ack id".
   */
  private checkOpen(): void {
    if (this.closed) throw closedError();
  }
}

function closedError(): FailedPreconditionError {
  return new FailedPreconditionError('the Orderly core is closed');
}

function detachedError(name: string): FailedPreconditionError {
  return new FailedPreconditionError(
    `subscription ${name} is detached from its topic (DetachSubscription): it receives no messages; delete it and create it again to receive messages`,
  );
}

/** On an exactly-once subscription, ack ids that were no longer valid fail the call, as Pub/Sub answers. */
function exactlyOnceResult(rt: SubscriptionRuntime, result: AckResult): AckResult {
  if (rt.exactlyOnce && result.invalidAckIds.length) throw new InvalidAckIdsError(rt.name, result.invalidAckIds);
  return result;
}

function describeTopic(rec: TopicRecord): Topic {
  return { name: rec.name, labels: rec.labels, ...topicSettings(rec.settings), state: 'ACTIVE' };
}

/** Why the subscription is not for pulling, if it is not: Pub/Sub's answer to Pull on a push or export subscription. */
function pullRefusal(rt: SubscriptionRuntime): FailedPreconditionError | undefined {
  const { spec } = rt;
  const kind = spec.pushConfig
    ? 'push'
    : spec.bigqueryConfig
      ? 'BigQuery'
      : spec.cloudStorageConfig
        ? 'Cloud Storage'
        : spec.exportConfig
          ? 'export'
          : undefined;
  return kind && new FailedPreconditionError(`This method is not supported for ${kind} subscriptions (${rt.name}).`);
}
