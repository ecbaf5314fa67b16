import type { Store, StoredMessage } from '../store/store.js';
import type { Clock } from './clock.js';
import { InvalidArgumentError } from './errors.js';
import { parseFilter, type Filter } from './filter.js';
import { KeyQueue, type Entry } from './key-queue.js';
import { LeaseManager, type Lease } from './lease-manager.js';
import { messageSize, type PubsubMessage, type ReceivedMessage } from './message.js';
import { retryDelayMs } from './retry-backoff.js';
import type { SubscriptionSpec } from './subscription-config.js';

const NO_DATA = Buffer.alloc(0);

/** Pub/Sub's subscription states, including the export-specific ones. */
export type SubscriptionState =
  | 'ACTIVE'
  | 'RESOURCE_ERROR'
  | 'PERMISSION_DENIED'
  | 'NOT_FOUND'
  | 'SCHEMA_MISMATCH'
  | 'IN_TRANSIT_LOCATION_RESTRICTION';

/**
 * Something that takes deliveries as they become available: a streaming subscriber, a push worker, a
 * waiting pull, an export runner. Consumers sharing an `affinity` name are one client for key affinity.
 */
export interface Consumer {
  readonly id: string;
  readonly affinity: string;
  /** How many messages of one key one delivery may carry (push: 1). */
  readonly maxPerKey: number;
  /** Lease length for what this consumer receives; the subscription's ackDeadlineSeconds if unset. */
  readonly ackDeadlineSeconds?: number;
  /**
   * The consumer handles what it receives strictly in delivery order (an export runner), so a key's
   * next messages may go to it while earlier ones are still outstanding there. Deliveries that a
   * failure revoked (see `isLive`) must be dropped, not handled.
   */
  readonly pipelined?: boolean;
  room(): { messages: number; bytes: number };
  deliver(batch: ReceivedMessage[]): void;
}

export interface RuntimeHooks {
  clock: Clock;
  store: Store;
  /**
   * Forwards a message to the dead-letter topic; resolves once that publish is durable. False if the
   * topic does not exist (then the message is retried instead).
   */
  deadLetter(runtime: SubscriptionRuntime, entry: Entry): Promise<void> | false;
  /** A durable write failed; the message stays in memory and will be delivered again. */
  onStoreError(error: unknown): void;
  /** Payload bytes the subscription keeps in memory; beyond, payloads stay in the store until delivered. */
  residentBytes: number;
}

export interface DeliveryCounters {
  delivered: number;
  redelivered: number;
  acked: number;
  nacked: number;
  expired: number;
  deadLettered: number;
}

export interface SubscriptionMetrics {
  backlogMessages: number;
  backlogBytes: number;
  /** Payload bytes held in memory (at most CoreOptions.residentBytesPerSubscription); the rest is read back from the store. */
  residentBytes: number;
  outstandingMessages: number;
  oldestUnackedPublishTime: number | undefined;
  /** Keys with the most unacked messages, largest first: the hot keys. */
  topKeys: { orderingKey: string; backlog: number }[];
  counters: DeliveryCounters;
}

/**
 * Delivery state of one subscription, in memory: a queue per ordering key, the leases out, and the
 * consumers to hand messages to. The store holds the durable half (messages, acks, failure counts);
 * `PubSubCore.open` rebuilds this from it after a restart.
 */
export class SubscriptionRuntime {
  state: SubscriptionState = 'ACTIVE';
  readonly leases: LeaseManager;
  readonly counters: DeliveryCounters = { delivered: 0, redelivered: 0, acked: 0, nacked: 0, expired: 0, deadLettered: 0 };
  private filter: Filter;
  private readonly keyed = new Map<string, KeyQueue>();
  private readonly loose = new Set<KeyQueue>();
  private readonly ready = new Set<KeyQueue>();
  private readonly delayed = new Set<KeyQueue>();
  private readonly consumers = new Map<string, Consumer>();
  private dispatchScheduled = false;
  private closed = false;
  /** Payload bytes of the entries held with their payload. */
  private resident = 0;
  private readonly dropped = (entry: Entry) => {
    if (!entry.spilled) this.resident -= entry.message.data.byteLength;
  };

  constructor(
    readonly name: string,
    public spec: SubscriptionSpec,
    readonly topicUid: number,
    private readonly hooks: RuntimeHooks,
  ) {
    this.filter = parseFilter(spec.filter);
    this.leases = new LeaseManager(`${shortHash(name)}${hooks.clock.now().toString(36)}`);
  }

  /**
   * Adds a message (a new publish, or a backlog row at start, whose payload is left out and `dataBytes`
   * long). Non-matching messages are acked at once. Within the payload budget the entry holds the payload;
   * beyond it, only the rest, and the payload is read back from the store when the entry is delivered.
   */
  enqueue(message: StoredMessage, failures = 0, dataBytes = message.data.byteLength): void {
    if (!this.filter(message.attributes)) {
      this.persistAcks([message.seq]);
      return;
    }
    const size = messageSize(message) - message.data.byteLength + dataBytes;
    let spilled = this.resident + dataBytes > this.hooks.residentBytes;
    if (!spilled && message.data.byteLength !== dataBytes) {
      const data = this.hooks.store.readData(message.seq);
      if (data) message = { ...message, data };
      else spilled = true;
    }
    if (spilled) message = message.data.byteLength ? { ...message, data: NO_DATA } : message;
    else this.resident += dataBytes;
    let queue: KeyQueue;
    if (this.spec.enableMessageOrdering && message.orderingKey !== '') {
      queue = this.keyed.get(message.orderingKey) ?? new KeyQueue(message.orderingKey, true);
      this.keyed.set(message.orderingKey, queue);
    } else {
      queue = new KeyQueue(message.orderingKey, false);
      this.loose.add(queue);
    }
    queue.push({ message, spilled, size, acked: false, failures, deliveries: 0 });
    this.refresh(queue);
    this.scheduleDispatch();
  }

  addConsumer(consumer: Consumer): void {
    this.consumers.set(consumer.id, consumer);
    this.scheduleDispatch();
  }

  removeConsumer(id: string): void {
    this.consumers.delete(id);
  }

  hasConsumer(id: string): boolean {
    return this.consumers.has(id);
  }

  /** Hands the consumers over (seek rebuilds the runtime under them). */
  detachConsumers(): Consumer[] {
    const all = [...this.consumers.values()];
    this.consumers.clear();
    return all;
  }

  /** Hands out what is ready to the consumers with room. Synchronous; safe to call at any time. */
  dispatch(): void {
    this.dispatchScheduled = false;
    if (this.closed || this.consumers.size === 0 || this.ready.size === 0) return;
    const rooms = new Map<Consumer, { messages: number; bytes: number }>();
    for (const c of this.consumers.values()) {
      const room = c.room();
      if (room.messages > 0 && room.bytes > 0) rooms.set(c, { ...room });
    }
    const batches = new Map<Consumer, ReceivedMessage[]>();
    for (const queue of this.ready) {
      if (rooms.size === 0) break;
      const consumer = this.pick(queue, rooms);
      if (!consumer) continue;
      const room = rooms.get(consumer)!;
      const batch = batches.get(consumer) ?? [];
      batches.set(consumer, batch);
      this.take(queue, consumer, room, batch);
      if (room.messages <= 0 || room.bytes <= 0) rooms.delete(consumer);
    }
    for (const [consumer, batch] of batches) if (batch.length > 0) consumer.deliver(batch);
  }

  scheduleDispatch(): void {
    if (this.dispatchScheduled || this.consumers.size === 0) return;
    this.dispatchScheduled = true;
    queueMicrotask(() => this.dispatch());
  }

  /**
   * A key with outstanding messages keeps its consumer (and reaches here only for a pipelined one);
   * otherwise it goes to its last consumer if that has room, else where there is most room.
   */
  private pick(queue: KeyQueue, rooms: Map<Consumer, { messages: number; bytes: number }>): Consumer | undefined {
    let best: Consumer | undefined;
    let bestRoom = -1;
    for (const [c, room] of rooms) {
      if (queue.affinity !== undefined && c.affinity === queue.affinity) return c;
      if (room.messages > bestRoom) {
        best = c;
        bestRoom = room.messages;
      }
    }
    return queue.outstanding > 0 ? undefined : best;
  }

  private take(queue: KeyQueue, consumer: Consumer, room: { messages: number; bytes: number }, batch: ReceivedMessage[]): void {
    const now = this.hooks.clock.now();
    const retentionStart = now - this.spec.messageRetentionDuration * 1000;
    const deadline = now + (consumer.ackDeadlineSeconds ?? this.spec.ackDeadlineSeconds) * 1000;
    const limit = queue.ordered ? consumer.maxPerKey : 1;
    const expired: number[] = [];
    let taken = 0;
    while (taken < limit && room.messages > 0 && room.bytes > 0) {
      const entry = queue.takeNext();
      if (!entry) break;
      const message = entry.message.publishTime < retentionStart ? undefined : this.withPayload(entry);
      if (!message) {
        // Past messageRetentionDuration (or compacted away for that reason): Pub/Sub drops it from the backlog.
        entry.acked = true;
        expired.push(entry.message.seq);
        continue;
      }
      const lease = this.leases.grant(queue, entry, deadline, consumer.id);
      if (entry.deliveries++ > 0) this.counters.redelivered++;
      this.counters.delivered++;
      batch.push({ ackId: lease.ackId, message: toPubsubMessage(message), deliveryAttempt: this.deliveryAttempt(entry) });
      taken++;
      room.messages--;
      room.bytes -= entry.size;
    }
    queue.affinity = consumer.affinity;
    if (expired.length) {
      queue.trimAcked(this.dropped);
      this.persistAcks(expired);
    }
    this.refresh(queue);
  }

  /** The entry's message with its payload, read back from the store if it was spilled; undefined if gone. */
  withPayload(entry: Entry): StoredMessage | undefined {
    if (!entry.spilled) return entry.message;
    const data = this.hooks.store.readData(entry.message.seq);
    return data && { ...entry.message, data };
  }

  private deliveryAttempt(entry: Entry): number {
    return this.spec.deadLetterPolicy ? entry.failures + 1 : 0;
  }

  /** Acks; stale or unknown ack ids are ignored. Resolves once the acks are durable. */
  async acknowledge(ackIds: string[]): Promise<void> {
    const seqs: number[] = [];
    for (const ackId of ackIds) {
      const lease = this.leases.get(ackId);
      if (!lease) continue;
      lease.entry.acked = true;
      this.leases.end(lease);
      lease.queue.trimAcked(this.dropped);
      this.refresh(lease.queue);
      seqs.push(lease.entry.message.seq);
      this.counters.acked++;
    }
    this.scheduleDispatch();
    if (seqs.length) await this.hooks.store.ack(this.name, seqs);
  }

  /** 0 seconds is a nack; otherwise the lease runs that long from now. Stale ids are ignored. */
  modifyAckDeadline(ackIds: string[], seconds: number, error?: string): void {
    if (!Number.isInteger(seconds) || seconds < 0 || seconds > 600) {
      throw new InvalidArgumentError('ackDeadlineSeconds', `must be an integer between 0 and 600, got ${seconds}`);
    }
    const now = this.hooks.clock.now();
    for (const ackId of ackIds) {
      const lease = this.leases.get(ackId);
      if (!lease) continue;
      if (seconds === 0) this.fail(lease, 'nack', error);
      else this.leases.extend(lease, now + seconds * 1000);
    }
    this.scheduleDispatch();
  }

  isLive(ackId: string): boolean {
    return this.leases.get(ackId) !== undefined;
  }

  /** Expires leases past their deadline and releases keys whose backoff has passed. */
  tick(): void {
    const now = this.hooks.clock.now();
    for (const lease of this.leases.due(now)) {
      if (this.leases.get(lease.ackId) === lease && lease.deadline <= now) this.fail(lease, 'expired');
    }
    for (const queue of this.delayed) if (queue.notBefore <= now) this.refresh(queue);
    this.scheduleDispatch();
  }

  /**
   * A delivery failed (nack or expiry). The message and, for an ordering key, every later message of
   * the key become deliverable again, in order, even later ones already acked; past maxDeliveryAttempts
   * the message goes to the dead-letter topic and the key moves on.
   */
  private fail(lease: Lease, cause: 'nack' | 'expired', error?: string): void {
    const { entry, queue } = lease;
    this.leases.end(lease);
    entry.failures++;
    if (error !== undefined) entry.lastError = error;
    this.counters[cause === 'nack' ? 'nacked' : 'expired']++;
    for (const later of queue.rewindTo(entry)) this.leases.end(later.lease!);
    this.hooks.store.setFailures(this.name, entry.message.seq, entry.failures).catch(this.hooks.onStoreError);
    const policy = this.spec.deadLetterPolicy;
    const forwarded = policy && entry.failures >= policy.maxDeliveryAttempts ? this.hooks.deadLetter(this, entry) : false;
    if (forwarded) {
      this.counters.deadLettered++;
      entry.acked = true;
      queue.skip(entry);
      queue.trimAcked(this.dropped);
      // Acked only once the copy is durable in the dead-letter topic: a crash in between redelivers it.
      forwarded.then(() => this.persistAcks([entry.message.seq]), this.hooks.onStoreError);
    } else {
      queue.notBefore = this.hooks.clock.now() + retryDelayMs(this.spec, entry.failures);
    }
    this.refresh(queue);
  }

  private refresh(queue: KeyQueue): void {
    if (queue.isIdle) {
      if (this.keyed.get(queue.key) === queue) this.keyed.delete(queue.key);
      this.loose.delete(queue);
      this.ready.delete(queue);
      this.delayed.delete(queue);
    } else if (queue.hasUndelivered && (queue.outstanding === 0 || this.pipelinedAffinity(queue.affinity))) {
      if (queue.notBefore > this.hooks.clock.now()) {
        this.ready.delete(queue);
        this.delayed.add(queue);
      } else {
        this.delayed.delete(queue);
        this.ready.add(queue);
      }
    } else {
      this.ready.delete(queue);
      this.delayed.delete(queue);
    }
  }

  private pipelinedAffinity(affinity: string | undefined): boolean {
    if (affinity === undefined) return false;
    for (const c of this.consumers.values()) if (c.affinity === affinity && c.pipelined) return true;
    return false;
  }

  private persistAcks(seqs: number[]): void {
    this.hooks.store.ack(this.name, seqs).catch(this.hooks.onStoreError);
  }

  private *queues(): IterableIterator<KeyQueue> {
    yield* this.keyed.values();
    yield* this.loose;
  }

  /** Lowest seq still held in memory (acked-in-window included), for compaction. */
  lowestHeldSeq(): number | undefined {
    let low: number | undefined;
    for (const q of this.queues()) {
      const seq = q.first()?.message.seq;
      if (seq !== undefined && (low === undefined || seq < low)) low = seq;
    }
    return low;
  }

  metrics(topN = 10): SubscriptionMetrics {
    let backlogMessages = 0;
    let backlogBytes = 0;
    let oldest: number | undefined;
    const perKey: { orderingKey: string; backlog: number }[] = [];
    for (const q of this.queues()) {
      let n = 0;
      for (const e of q.entries()) {
        if (e.acked) continue;
        n++;
        backlogBytes += e.size;
        if (oldest === undefined || e.message.publishTime < oldest) oldest = e.message.publishTime;
      }
      backlogMessages += n;
      if (q.ordered && n > 0) perKey.push({ orderingKey: q.key, backlog: n });
    }
    perKey.sort((a, b) => b.backlog - a.backlog || (a.orderingKey < b.orderingKey ? -1 : 1));
    return {
      backlogMessages,
      backlogBytes,
      residentBytes: this.resident,
      outstandingMessages: this.leases.size,
      oldestUnackedPublishTime: oldest,
      topKeys: perKey.slice(0, topN),
      counters: { ...this.counters },
    };
  }

  /** Forgets everything in memory (delete, seek, shutdown); leases become stale. */
  close(): void {
    this.closed = true;
    this.resident = 0;
    this.leases.endAll();
    this.keyed.clear();
    this.loose.clear();
    this.ready.clear();
    this.delayed.clear();
    this.consumers.clear();
  }
}

export function toPubsubMessage(m: StoredMessage): PubsubMessage {
  return {
    messageId: String(m.seq),
    publishTime: new Date(m.publishTime),
    data: m.data,
    attributes: m.attributes,
    orderingKey: m.orderingKey,
    sequence: m.keySeq,
  };
}

function shortHash(s: string): string {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
  return (h >>> 0).toString(36);
}
