import type { Store, StoredMessage, SubscriptionRecord, TopicRecord } from '../store/store.js';
import { systemClock, type Clock } from './clock.js';
import { AlreadyExistsError, FailedPreconditionError, InvalidArgumentError, NotFoundError } from './errors.js';
import type { Entry } from './key-queue.js';
import { validateBatch, type ValidMessage } from './limits.js';
import type { MessageInput, ReceivedMessage } from './message.js';
import { projectOf, resourceName, shortId } from './names.js';
import {
  checkImmutable,
  normalizeSubscription,
  type SubscriptionInput,
  type SubscriptionSpec,
} from './subscription-config.js';
import { SubscriptionRuntime, type Consumer, type SubscriptionMetrics, type SubscriptionState } from './subscription-runtime.js';
import { PushDelivery } from './push-delivery.js';
import { DEFAULT_PUSH_EGRESS, type PushEgress } from './push-egress.js';
import { Subscriber, type MessageHandler, type SubscribeOptions } from './subscriber.js';

export interface Topic {
  name: string;
  labels: Record<string, string>;
}

export interface Subscription extends SubscriptionSpec {
  name: string;
  state: SubscriptionState;
}

export interface CoreOptions {
  store: Store;
  clock?: Clock;
  /** Project for bare ids (`orders` -> `projects/<projectId>/topics/orders`). */
  projectId?: string;
  /** How often leases and backoffs are checked, in ms. */
  tickMs?: number;
  /** How often acked and expired messages are compacted away, in ms. */
  compactEveryMs?: number;
  /** Called when a background durable write fails (the affected messages will be delivered again). */
  onStoreError?: (error: unknown) => void;
  /**
   * Payload bytes each subscription keeps in memory (default 256 MiB). A larger backlog keeps only its
   * metadata in memory and reads payloads back from the store as they are delivered, so a sink that is
   * down for hours does not exhaust memory, before or after a restart.
   */
  residentBytesPerSubscription?: number;
  /** Where push subscriptions may deliver; link-local and metadata addresses are refused by default. */
  push?: PushEgress;
}

export interface PullOptions {
  maxMessages?: number;
  /** Wait up to this long for a message when none is ready (Pub/Sub's returnImmediately=false). */
  waitMs?: number;
}

const DELETED_TOPIC = '_deleted-topic_';

/**
 * The ordered subscription core: topics, subscriptions, publish and delivery with Pub/Sub's semantics
 * (per-key order, one outstanding batch per key, redelivery of a key's later messages, dead letters,
 * backoff, retention, seek), durable through a `Store`.
 */
export class PubSubCore {
  readonly projectId: string;
  readonly clock: Clock;
  private readonly store: Store;
  private readonly topics = new Map<string, TopicRecord>();
  private readonly subs = new Map<string, SubscriptionRuntime>();
  private readonly keySeqs = new Map<string, number>();
  private readonly pushers = new Map<string, PushDelivery>();
  /** Messages published per topic name since start (for metrics). */
  readonly published = new Map<string, number>();
  private lastSeq = 0;
  private lastPublishTime = 0;
  /** Highest seq handed to the subscriptions; compaction must not pass it. */
  private fannedOutSeq = 0;
  private allocation: Promise<unknown> = Promise.resolve();
  private readonly timers: { cancel(): void }[] = [];
  private readonly onStoreError: (e: unknown) => void;
  private readonly residentBytesPerSubscription: number;
  private readonly pushEgress: PushEgress;
  private closed = false;

  private constructor(options: CoreOptions) {
    this.store = options.store;
    this.clock = options.clock ?? systemClock;
    this.projectId = options.projectId ?? 'orderly';
    this.onStoreError = options.onStoreError ?? ((e) => console.error('orderly: durable write failed:', e));
    this.residentBytesPerSubscription = options.residentBytesPerSubscription ?? 256 * 1024 * 1024;
    this.pushEgress = options.push ?? DEFAULT_PUSH_EGRESS;
  }

  /** Loads topics, subscriptions and every subscription's unacked backlog from the store. */
  static async open(options: CoreOptions): Promise<PubSubCore> {
    const core = new PubSubCore(options);
    await core.load();
    core.timers.push(core.clock.setInterval(() => core.tick(), options.tickMs ?? 100));
    core.timers.push(
      core.clock.setInterval(() => void core.compact().catch(core.onStoreError), options.compactEveryMs ?? 60_000),
    );
    return core;
  }

  private async load(): Promise<void> {
    this.lastSeq = this.fannedOutSeq = await this.store.lastSeq();
    for (const t of await this.store.listTopics()) this.topics.set(t.name, t);
    for (const rec of await this.store.listSubscriptions()) await this.startRuntime(rec);
  }

  /**
   * Rebuilds a subscription's delivery state. For an ordering key, delivery resumes at its first unacked
   * message and every later one is delivered again, acked or not: the redelivery rule, applied to the
   * deliveries a restart interrupted.
   */
  private async startRuntime(rec: SubscriptionRecord): Promise<SubscriptionRuntime> {
    const spec = rec.spec as SubscriptionSpec;
    const runtime = new SubscriptionRuntime(rec.name, spec, rec.topicUid, {
      clock: this.clock,
      store: this.store,
      deadLetter: (rt, entry) => this.deadLetter(rt, entry),
      onStoreError: this.onStoreError,
      residentBytes: this.residentBytesPerSubscription,
    });
    const since = this.clock.now() - spec.messageRetentionDuration * 1000;
    const resumed = new Set<string>();
    for (const row of await this.store.backlog(rec, since)) {
      const key = row.message.orderingKey;
      const ordered = spec.enableMessageOrdering && key !== '';
      if (row.acked && (!ordered || !resumed.has(key))) continue;
      if (ordered) resumed.add(key);
      runtime.enqueue(row.message, row.failures, row.dataBytes);
    }
    this.subs.set(rec.name, runtime);
    this.syncPush(rec.name);
    return runtime;
  }

  /** Starts or stops the push worker to match the subscription's pushConfig. */
  private syncPush(name: string): void {
    const wantsPush = this.subs.get(name)?.spec.pushConfig !== undefined;
    const pusher = this.pushers.get(name);
    if (wantsPush && !pusher) this.pushers.set(name, new PushDelivery(this, name, this.pushEgress, this.onStoreError));
    if (!wantsPush && pusher) {
      pusher.stop();
      this.pushers.delete(name);
    }
  }

  // ---- topics ----

  topicName(ref: string, field = 'topic'): string {
    return resourceName('topics', ref, this.projectId, field);
  }

  subscriptionName(ref: string, field = 'subscription'): string {
    return resourceName('subscriptions', ref, this.projectId, field);
  }

  async createTopic(ref: string, options: { labels?: Record<string, string> } = {}): Promise<Topic> {
    const name = this.topicName(ref, 'name');
    if (this.topics.has(name)) throw new AlreadyExistsError('Topic', name);
    const rec = await this.store.createTopic(name, { ...(options.labels ?? {}) });
    this.topics.set(name, rec);
    return { name, labels: rec.labels };
  }

  getTopic(ref: string): Topic {
    const rec = this.topicRecord(ref);
    return { name: rec.name, labels: rec.labels };
  }

  hasTopic(ref: string): boolean {
    return this.topics.has(this.topicName(ref));
  }

  async updateTopic(ref: string, patch: { labels?: Record<string, string> }): Promise<Topic> {
    const rec = this.topicRecord(ref);
    if (patch.labels) rec.labels = { ...patch.labels };
    await this.store.updateTopic(rec);
    return { name: rec.name, labels: rec.labels };
  }

  listTopics(project = this.projectId): Topic[] {
    return [...this.topics.values()].filter((t) => projectOf(t.name) === project).map((t) => ({ name: t.name, labels: t.labels }));
  }

  /** Deletes the topic; its subscriptions stay (topic shown as `_deleted-topic_`) and keep their backlog. */
  async deleteTopic(ref: string): Promise<void> {
    const rec = this.topicRecord(ref);
    await this.store.deleteTopic(rec.uid);
    this.topics.delete(rec.name);
  }

  listTopicSubscriptions(ref: string): string[] {
    const rec = this.topicRecord(ref);
    return [...this.subs.values()].filter((s) => s.topicUid === rec.uid).map((s) => s.name);
  }

  private topicRecord(ref: string): TopicRecord {
    const name = this.topicName(ref);
    const rec = this.topics.get(name);
    if (!rec) throw new NotFoundError('Topic', name);
    return rec;
  }

  // ---- subscriptions ----

  async createSubscription(ref: string, input: SubscriptionInput): Promise<Subscription> {
    const name = this.subscriptionName(ref, 'name');
    const spec = normalizeSubscription(input, (t, field) => this.topicName(t, field));
    if (this.subs.has(name)) throw new AlreadyExistsError('Subscription', name);
    const topic = this.topics.get(spec.topic);
    if (!topic) throw new NotFoundError('Topic', spec.topic);
    this.checkDeadLetterTopic(spec);
    // Delivery starts with messages published after creation: everything up to now is below the watermark.
    const rec: SubscriptionRecord = { name, topicUid: topic.uid, spec, lowSeq: this.fannedOutSeq };
    await this.store.createSubscription(rec);
    await this.startRuntime(rec);
    return this.getSubscription(name);
  }

  private checkDeadLetterTopic(spec: SubscriptionSpec): void {
    const dlt = spec.deadLetterPolicy?.deadLetterTopic;
    if (dlt && !this.topics.has(dlt)) throw new NotFoundError('Dead-letter topic', dlt);
  }

  getSubscription(ref: string): Subscription {
    const rt = this.runtime(ref);
    return { name: rt.name, ...this.describeSpec(rt), state: rt.state };
  }

  private describeSpec(rt: SubscriptionRuntime): SubscriptionSpec {
    // A topic deleted and created again under the same name is another topic (another uid).
    const topicLive = this.topics.get(rt.spec.topic)?.uid === rt.topicUid;
    return { ...rt.spec, topic: topicLive ? rt.spec.topic : DELETED_TOPIC };
  }

  hasSubscription(ref: string): boolean {
    return this.subs.has(this.subscriptionName(ref));
  }

  listSubscriptions(project = this.projectId): Subscription[] {
    return [...this.subs.values()]
      .filter((s) => projectOf(s.name) === project)
      .sort((a, b) => (a.name < b.name ? -1 : 1))
      .map((s) => this.getSubscription(s.name));
  }

  /** Changes the mutable fields given in `patch`; ordering, filter and topic are fixed at creation. */
  async updateSubscription(ref: string, patch: Partial<SubscriptionInput>): Promise<Subscription> {
    const rt = this.runtime(ref);
    // A spec is a valid input (durations in seconds), so the merge is validated as a whole.
    const merged: SubscriptionInput = { ...rt.spec, ...patch, topic: patch.topic ?? rt.spec.topic };
    const next = normalizeSubscription(merged, (t, field) => this.topicName(t, field));
    checkImmutable(rt.spec, next);
    this.checkDeadLetterTopic(next);
    await this.store.updateSubscriptionSpec(rt.name, next);
    rt.spec = next;
    this.syncPush(rt.name);
    return this.getSubscription(rt.name);
  }

  async deleteSubscription(ref: string): Promise<void> {
    const rt = this.runtime(ref);
    rt.close();
    this.subs.delete(rt.name);
    this.syncPush(rt.name);
    await this.store.deleteSubscription(rt.name);
  }

  /** For export connectors: reflect the sink's health in the subscription's `state`. */
  setSubscriptionState(ref: string, state: SubscriptionState): void {
    this.runtime(ref).state = state;
  }

  runtime(ref: string): SubscriptionRuntime {
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
  async publish(topicRef: string, inputs: MessageInput[]): Promise<string[]> {
    const topic = this.topicRecord(topicRef);
    const messages = validateBatch(inputs);
    return this.append(topic, messages);
  }

  private async append(topic: TopicRecord, messages: ValidMessage[]): Promise<string[]> {
    if (this.closed) throw new FailedPreconditionError('the Orderly core is closed');
    // Sequence numbers are handed out strictly in call order, so key order = publish order.
    const allocated = this.allocation.then(() => this.allocate(topic, messages));
    this.allocation = allocated.catch(() => undefined);
    const stored = await allocated;
    await this.store.append(stored);
    this.published.set(topic.name, (this.published.get(topic.name) ?? 0) + stored.length);
    this.fanOut(topic.uid, stored);
    return stored.map((m) => String(m.seq));
  }

  private async allocate(topic: TopicRecord, messages: ValidMessage[]): Promise<StoredMessage[]> {
    for (const m of messages) {
      const k = `${topic.uid}\u0000${m.orderingKey}`;
      if (!this.keySeqs.has(k)) this.keySeqs.set(k, await this.store.lastKeySeq(topic.uid, m.orderingKey));
    }
    const publishTime = (this.lastPublishTime = Math.max(this.lastPublishTime, this.clock.now()));
    return messages.map((m) => {
      const k = `${topic.uid}\u0000${m.orderingKey}`;
      const keySeq = this.keySeqs.get(k)! + 1;
      this.keySeqs.set(k, keySeq);
      return { seq: ++this.lastSeq, topicUid: topic.uid, orderingKey: m.orderingKey, keySeq, publishTime, ...pick(m) };
    });
  }

  private fanOut(topicUid: number, messages: StoredMessage[]): void {
    for (const rt of this.subs.values()) {
      if (rt.topicUid !== topicUid) continue;
      for (const m of messages) rt.enqueue(m);
    }
    this.fannedOutSeq = Math.max(this.fannedOutSeq, messages[messages.length - 1]!.seq);
  }

  private deadLetter(source: SubscriptionRuntime, entry: Entry): Promise<void> | false {
    const dltName = source.spec.deadLetterPolicy?.deadLetterTopic;
    const dlt = dltName ? this.topics.get(dltName) : undefined;
    if (!dlt) return false;
    const m = source.withPayload(entry);
    if (!m) return false;
    const attributes: Record<string, string> = {
      ...m.attributes,
      CloudPubSubDeadLetterSourceDeliveryCount: String(entry.failures),
      CloudPubSubDeadLetterSourceSubscription: shortId(source.name),
      CloudPubSubDeadLetterSourceSubscriptionProject: projectOf(source.name),
      CloudPubSubDeadLetterSourceTopicPublishTime: new Date(m.publishTime).toISOString(),
    };
    if (entry.lastError !== undefined) attributes.CloudPubSubDeadLetterSourceDeliveryErrorMessage = entry.lastError.slice(0, 1024);
    // Forwarded as is: Pub/Sub does not apply publish limits to dead-lettering.
    return this.append(dlt, [{ data: m.data, attributes, orderingKey: m.orderingKey }]).then(() => undefined);
  }

  // ---- delivery ----

  /** Pull: up to maxMessages ready messages; a key's messages come in order and only one batch per key is out. */
  async pull(subRef: string, options: PullOptions = {}): Promise<ReceivedMessage[]> {
    const rt = this.runtime(subRef);
    const max = options.maxMessages ?? 100;
    if (!Number.isInteger(max) || max < 1) throw new InvalidArgumentError('maxMessages', `must be a positive integer, got ${max}`);
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const consumer: Consumer = {
        id: `pull-${Math.random().toString(36).slice(2)}`,
        affinity: 'pull',
        maxPerKey: Number.MAX_SAFE_INTEGER,
        room: () => ({ messages: max, bytes: Number.MAX_SAFE_INTEGER }),
        deliver: (batch) => finish(batch),
      };
      const finish = (batch: ReceivedMessage[]) => {
        rt.removeConsumer(consumer.id);
        if (timer) clearTimeout(timer);
        resolve(batch);
      };
      rt.addConsumer(consumer);
      rt.dispatch();
      if (!options.waitMs) finish([]);
      else if (rt.hasConsumer(consumer.id)) timer = setTimeout(() => finish([]), options.waitMs);
    });
  }

  async acknowledge(subRef: string, ackIds: string[]): Promise<void> {
    await this.runtime(subRef).acknowledge(ackIds);
  }

  /** 0 = nack. `error` says why (export connectors), carried to the dead-letter topic. */
  async modifyAckDeadline(subRef: string, ackIds: string[], seconds: number, error?: string): Promise<void> {
    this.runtime(subRef).modifyAckDeadline(ackIds, seconds, error);
  }

  /** Streaming/callback delivery; see `Subscriber`. */
  subscribe(subRef: string, handler: MessageHandler, options: SubscribeOptions = {}): Subscriber {
    return new Subscriber(this, this.runtime(subRef), handler, options);
  }

  /** Messages published before `time` become acked, later ones unacked (if still retained). */
  async seek(subRef: string, time: Date | number): Promise<void> {
    const rt = this.runtime(subRef);
    const at = typeof time === 'number' ? time : time.getTime();
    const rec: SubscriptionRecord = { name: rt.name, topicUid: rt.topicUid, spec: rt.spec, lowSeq: 0 };
    // End the outstanding deliveries first: an ack arriving during the seek must find its lease gone,
    // or it would be recorded after the seek and swallow the replay.
    const consumers = rt.detachConsumers();
    const state = rt.state;
    rt.close();
    rec.lowSeq = await this.store.seek(rec, at);
    const fresh = await this.startRuntime(rec);
    fresh.state = state;
    for (const c of consumers) fresh.addConsumer(c);
  }

  metrics(subRef: string, topN?: number): SubscriptionMetrics {
    return this.runtime(subRef).metrics(topN);
  }

  /** Resolves once every store write issued so far (publishes, acks, failure counts) has committed. */
  flushed(): Promise<void> {
    return this.store.flush();
  }

  tick(): void {
    for (const rt of this.subs.values()) rt.tick();
  }

  /** Drops what no subscription can be given again (acked by all, or past retention). */
  async compact(): Promise<{ deletedMessages: number }> {
    const now = this.clock.now();
    const watermarks = new Map<string, number>();
    const deleteUpTo = new Map<number, number>();
    const deletePublishedBefore = new Map<number, number>();
    const retainAcked = new Set<number>();
    const retention = new Map<number, number>();
    for (const rt of this.subs.values()) {
      const low = rt.lowestHeldSeq();
      const mark = low === undefined ? this.fannedOutSeq : low - 1;
      watermarks.set(rt.name, mark);
      deleteUpTo.set(rt.topicUid, Math.min(deleteUpTo.get(rt.topicUid) ?? Infinity, mark));
      if (rt.spec.retainAckedMessages) retainAcked.add(rt.topicUid);
      retention.set(rt.topicUid, Math.max(retention.get(rt.topicUid) ?? 0, rt.spec.messageRetentionDuration));
    }
    for (const t of this.topics.values()) if (!deleteUpTo.has(t.uid)) deleteUpTo.set(t.uid, this.fannedOutSeq);
    for (const uid of retainAcked) deleteUpTo.delete(uid);
    for (const [uid, seconds] of retention) deletePublishedBefore.set(uid, now - seconds * 1000);
    return this.store.compact({ watermarks, deleteUpTo, deletePublishedBefore });
  }

  /** Stops timers and closes the store; everything acknowledged so far is durable. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const t of this.timers) t.cancel();
    for (const p of this.pushers.values()) p.stop();
    await this.allocation;
    for (const rt of this.subs.values()) rt.close();
    await this.store.close();
  }
}

function pick(m: ValidMessage): { data: Buffer; attributes: Record<string, string> } {
  return { data: m.data, attributes: m.attributes };
}
