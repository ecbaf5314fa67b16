import type { BacklogRow, Store, StoredMessage } from '../store/store.js';
import type { AckResult } from './ack-results.js';
import { BacklogReader, type BacklogSink } from './backlog-reader.js';
import type { Clock } from './clock.js';
import type { ConsumerRoom, ConsumerSpec, StoredDelivery, SubscriptionHandle, SubscriptionState } from './consumer.js';
import { InvalidArgumentError, NotFoundError, type OrderlyError } from './errors.js';
import { parseFilter, type Filter } from './filter.js';
import { KeyQueue, type Entry, type Lease } from './key-queue.js';
import { LeaseManager } from './lease-manager.js';
import type { PayloadBudget } from './memory-budget.js';
import { messageSize, type PubsubMessage, type ReceivedMessage } from './message.js';
import { retryDelayMs } from './retry-backoff.js';
import type { SubscriptionSpec } from './subscription-config.js';
import { emptyCounters, type DeliveryCounters, type SubscriptionMetrics } from './subscription-metrics.js';

const NO_DATA = Buffer.alloc(0);
/**
 * Messages handed out per dispatch turn, to every consumer together; the rest of what is ready goes out
 * in the next turn. An export runner with room for its whole budget took 20,000 in one turn (82–118 ms of
 * leases and messages, and the garbage collection after), and a callback subscriber runs its handlers and
 * sends their acks in the turn that delivers to it (1,000 at once: 45–50 ms on the 2-core machine). 125
 * keeps a turn's dispatch near SLICE_MS (loop-slice.ts), like the other busy parts' slices. It is checked
 * between keys: one key's messages go out together, up to the consumer's room and maxPerKey.
 */
const DISPATCH_SLICE = 125;
/**
 * Messages in memory dropped per tick once past messageRetentionDuration with nobody taking them (`take`
 * drops them otherwise). 2,000 took 0.9 ms a tick (median, a full 20,000-message window; 9 ms at most) on
 * the 2-core machine, a visit of every key in memory included; the rest go in the next ticks.
 */
const EXPIRY_SLICE = 2_000;

export interface RuntimeHooks {
  clock: Clock;
  store: Store;
  /**
   * Forwards a message to the dead-letter topic; resolves once that publish is durable. False if the
   * topic does not exist (then the message is retried instead).
   */
  deadLetter(runtime: SubscriptionRuntime, entry: Entry): Promise<void> | false;
  /** A durable write failed; the message stays in memory and will be delivered again. */
  onStoreError: (error: unknown) => void;
  /** Payload bytes shared by every subscription of the core. */
  payloads: PayloadBudget;
  /**
   * Messages each subscription keeps in memory (unless a consumer attached asks for fewer: see
   * ConsumerSpec.windowMessages), and of those at most `perKey` of one ordering key.
   */
  window: { messages: number; perKey: number; of?: (spec: SubscriptionSpec) => number | undefined };
}

interface Attached {
  id: string;
  affinity: string;
  spec: ConsumerSpec;
  /** A Pull, StreamingPull or callback subscriber (not an export's source or a push worker): see endPulls. */
  pull: boolean;
}

/**
 * Delivery state of one subscription, in memory: a queue per ordering key holding a window of the
 * backlog (the rest is read from the store by a `BacklogReader`), the leases out, and the consumers
 * attached to it. The store holds the durable half (messages, acks, failure counts).
 */
export class SubscriptionRuntime implements BacklogSink {
  state: SubscriptionState = 'ACTIVE';
  /** Detached from its topic (DetachSubscription): closed for good, its backlog dropped; it stays listed. */
  detached = false;
  /** Its record's acksRetainedAfter: where its retention of acked messages began (SubscriptionRecord). */
  acksRetainedAfter = 0;
  readonly leases: LeaseManager<KeyQueue>;
  readonly counters: DeliveryCounters = emptyCounters();
  private lastNackReason?: { message: string; at: string };
  private filter: Filter;
  private readonly keyed = new Map<string, KeyQueue>();
  private readonly loose = new Set<KeyQueue>();
  private readonly ready = new Set<KeyQueue>();
  private readonly delayed = new Set<KeyQueue>();
  private readonly consumers = new Map<string, Attached>();
  private readonly reader: BacklogReader;
  private dispatchScheduled = false;
  private fillScheduled = false;
  private loaded = false;
  /** Overflowing keys that drained enough to read more of theirs back. */
  private readonly refillKeys = new Set<string>();
  private closed = false;
  /** Why the runtime was closed, for consumers that still act on it (deleted: NOT_FOUND; detached: FAILED_PRECONDITION). */
  private closedBy?: OrderlyError;
  private nextConsumer = 0;
  /** Entries in memory (waiting, outstanding, or acked behind an earlier outstanding one). */
  private held = 0;
  /** Payload bytes of the entries held with their payload. */
  private resident = 0;
  /** Messages this subscription keeps in memory now (see `resizeWindow`). */
  private window: number;
  /**
   * At most the publish time of every message in memory waiting to be handed out: none of them is past
   * retention before retention passes it, so a tick sweeps memory (`dropExpired`) only then.
   */
  private waitingSince = Infinity;
  private readonly dropped = (entry: Entry) => {
    this.held--;
    if (!entry.spilled) {
      this.resident -= entry.message.data.byteLength;
      this.hooks.payloads.give(entry.message.data.byteLength);
    }
  };

  constructor(
    readonly name: string,
    public spec: SubscriptionSpec,
    readonly topicUid: number,
    private readonly hooks: RuntimeHooks,
    lowSeq: number,
    lastSeq: number,
  ) {
    this.filter = parseFilter(spec.filter, { stored: true });
    this.leases = new LeaseManager(name, hooks.clock.now());
    this.window = this.ownWindow();
    this.reader = new BacklogReader(hooks.store, { name, topicUid }, this, lowSeq, lastSeq);
    this.scheduleFill();
  }

  get ordered(): boolean {
    return this.spec.enableMessageOrdering;
  }

  get matching(): Filter | undefined {
    return this.spec.filter ? this.filter : undefined;
  }

  /** Exactly-once delivery: a confirmed ack is final, and settling a lease that ended fails. */
  get exactlyOnce(): boolean {
    return this.spec.enableExactlyOnceDelivery;
  }

  // ---- the backlog window (BacklogSink) ----

  room(): number {
    return this.window - this.held;
  }

  keyLoad(orderingKey: string): number {
    return this.keyed.get(orderingKey)?.size ?? 0;
  }

  keyShare(): number {
    return Math.min(this.hooks.window.perKey, this.window);
  }

  /**
   * The window is the core's, or the smallest a consumer attached asks for (an export whose sink holds
   * memory of its own reads less ahead). Made smaller, what memory holds beyond it drains before more is
   * read; made larger again (that consumer gone), the reader fills the room.
   */
  private resizeWindow(): void {
    const before = this.window;
    this.window = Math.min(this.ownWindow(), ...[...this.consumers.values()].map((c) => c.spec.windowMessages ?? Infinity));
    if (this.window > before) this.scheduleFill();
  }

  /** The core's window, or the smaller one its settings ask for before any consumer attaches (MemoryOptions.windowOf). */
  private ownWindow(): number {
    return Math.min(this.hooks.window.messages, this.hooks.window.of?.(this.spec) ?? Infinity);
  }

  payloadRoom(): number {
    return this.hooks.payloads.room;
  }

  /** A message read from the store; an acked one comes back as a redelivery of its key. */
  admit(row: BacklogRow): void {
    this.enqueue(row.message, row.failures, row.dataBytes);
  }

  /** A message the filter refuses (the reader applies it): acked at once, never delivered. */
  skip(row: BacklogRow): void {
    this.persistAcks([row.message.seq]);
  }

  expiredUnread(count: number): void {
    this.counters.retentionExpired += count;
  }

  /** A message just published to the subscription's topic, durable in the store. */
  offer(message: StoredMessage): void {
    if (this.closed) return;
    this.reader.offer({ message, dataBytes: message.data.byteLength, acked: false, failures: 0 });
  }

  /**
   * Adds a message to its key's queue (the reader kept out those the filter refuses). Within the payload budget
   * the entry keeps its payload (if the message has it); beyond it, the payload is read back from the store
   * when the entry is delivered.
   */
  private enqueue(message: StoredMessage, failures: number, dataBytes: number): void {
    const size = messageSize(message) - message.data.byteLength + dataBytes;
    const hasData = message.data.byteLength === dataBytes;
    const spilled = !hasData || !this.hooks.payloads.take(dataBytes);
    if (spilled) message = message.data.byteLength ? { ...message, data: NO_DATA } : message;
    else this.resident += dataBytes;
    let queue: KeyQueue;
    if (this.ordered && message.orderingKey !== '') {
      queue = this.keyed.get(message.orderingKey) ?? new KeyQueue(message.orderingKey, true);
      this.keyed.set(message.orderingKey, queue);
    } else {
      queue = new KeyQueue(message.orderingKey, false);
      this.loose.add(queue);
    }
    // `lease` named from the start, as `deadLetter`: set at the first delivery, it would otherwise move the
    // entry's fields out of the object into a second one (~30 bytes more for every message in the window).
    queue.push({ message, spilled, size, acked: false, failures, deliveries: 0, deadLetter: undefined, lease: undefined });
    if (message.publishTime < this.waitingSince) this.waitingSince = message.publishTime;
    this.held++;
    this.refresh(queue);
    this.scheduleDispatch();
  }

  /** Reads more of the backlog from the store soon, when the window has room for it. */
  private scheduleFill(): void {
    if (this.fillScheduled || this.closed) return;
    this.fillScheduled = true;
    setImmediate(() => {
      this.fillScheduled = false;
      this.load();
    });
  }

  private load(): void {
    if (this.closed) return;
    this.loaded = true;
    // Overflowing keys first: their messages are older than any still unread.
    for (const key of this.refillKeys) if (this.reader.refillKey(key)) this.refillKeys.delete(key);
    // Rows past retention are passed, not read: none of them is read into memory only to be dropped there.
    const expiring = this.reader.expireSome(this.retentionStart());
    const more = !expiring && this.reader.fill();
    const counting = this.reader.countSome();
    if (expiring || more || counting) this.scheduleFill();
    this.scheduleDispatch();
  }

  /** After an ack: read more once half the window (or half a key's share) is free. */
  private afterTrim(queue: KeyQueue): void {
    if (queue.ordered && this.reader.overflows(queue.key) && this.keyLoad(queue.key) <= this.keyShare() / 2) this.refillKeys.add(queue.key);
    if (this.refillKeys.size || (this.reader.isBehind && this.held <= this.window / 2)) this.scheduleFill();
  }

  // ---- consumers ----

  /** The port consumers use; see `SubscriptionHandle`. */
  attach(spec: ConsumerSpec, pull = false): SubscriptionHandle {
    if (this.closedBy) throw this.closedBy;
    const id = `c${++this.nextConsumer}`;
    const consumer: Attached = { id, affinity: spec.affinity ?? id, spec, pull };
    this.consumers.set(id, consumer);
    this.resizeWindow();
    if (!this.loaded) this.load();
    this.scheduleDispatch();
    const live = () => {
      if (this.closed) throw this.closedBy ?? new NotFoundError('Subscription', this.name);
    };
    const currentSpec = () => this.spec;
    const closed = () => this.closed;
    return {
      subscription: this.name,
      get spec() {
        return currentSpec();
      },
      get attached() {
        return !closed();
      },
      kick: () => this.scheduleDispatch(),
      isLive: (ackId) => this.isLive(ackId),
      outstanding: () => this.leases.countFor(id),
      outstandingBytes: () => this.leases.bytesFor(id),
      acknowledge: async (ackIds) => {
        live();
        return this.acknowledge(ackIds);
      },
      modifyAckDeadline: (ackIds, seconds, error) => {
        live();
        return this.modifyAckDeadline(ackIds, seconds, error);
      },
      detach: () => {
        if (this.consumers.delete(id)) this.resizeWindow();
      },
    };
  }

  /**
   * The subscription became a push or export subscription, whose messages are not for pulling: its pull
   * consumers end with `reason` (a StreamingPull stream with its status), as a detach ends them. The ack
   * ids they hold stay valid until their leases end.
   */
  endPulls(reason: OrderlyError): void {
    for (const [id, c] of this.consumers) {
      if (!c.pull) continue;
      this.consumers.delete(id);
      c.spec.detached?.(reason);
    }
    this.resizeWindow();
  }

  /** Hands out what is ready to the consumers with room. Synchronous; safe to call at any time. */
  dispatch(): void {
    this.dispatchScheduled = false;
    if (this.closed || this.consumers.size === 0 || this.ready.size === 0) return;
    const rooms = new Map<Attached, ConsumerRoom>();
    for (const c of this.consumers.values()) {
      const room = c.spec.room();
      if (room.messages > 0 && room.bytes > 0) rooms.set(c, { ...room });
    }
    // Each consumer's batch holds the form it takes (see `take`).
    const batches = new Map<Attached, (ReceivedMessage | StoredDelivery)[]>();
    let handedOut = 0;
    for (const queue of this.ready) {
      if (rooms.size === 0) break;
      if (handedOut >= DISPATCH_SLICE) {
        this.scheduleDispatch();
        break;
      }
      const consumer = this.pick(queue, rooms);
      if (!consumer) continue;
      const room = rooms.get(consumer)!;
      const batch = batches.get(consumer) ?? [];
      batches.set(consumer, batch);
      const before = batch.length;
      this.take(queue, consumer, room, batch);
      handedOut += batch.length - before;
      if (room.messages <= 0 || room.bytes <= 0) rooms.delete(consumer);
    }
    for (const [{ spec }, batch] of batches) {
      if (batch.length === 0) continue;
      if (spec.deliverStored) spec.deliverStored(batch as StoredDelivery[]);
      else spec.deliver(batch as ReceivedMessage[]);
    }
  }

  /**
   * Dispatch runs as its own macrotask: a consumer that settles synchronously would otherwise keep the
   * delivery loop on microtasks and starve timers and the store's commits (acks would not be durable
   * until the whole backlog had been handled).
   */
  scheduleDispatch(): void {
    if (this.dispatchScheduled || this.consumers.size === 0 || this.closed) return;
    this.dispatchScheduled = true;
    setImmediate(() => this.dispatch());
  }

  /**
   * A key with outstanding messages keeps its consumer (and reaches here only for a pipelined one);
   * otherwise it goes to its last consumer if that has room, else where there is most room.
   */
  private pick(queue: KeyQueue, rooms: Map<Attached, ConsumerRoom>): Attached | undefined {
    let best: Attached | undefined;
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

  /** Messages published before this are past the subscription's messageRetentionDuration: never delivered again. */
  private retentionStart(now = this.hooks.clock.now()): number {
    return now - this.spec.messageRetentionDuration * 1000;
  }

  private take(queue: KeyQueue, consumer: Attached, room: ConsumerRoom, batch: (ReceivedMessage | StoredDelivery)[]): void {
    const stored = consumer.spec.deliverStored !== undefined;
    const now = this.hooks.clock.now();
    const retentionStart = this.retentionStart(now);
    const deadline = now + (consumer.spec.ackDeadlineSeconds ?? this.spec.ackDeadlineSeconds) * 1000;
    const limit = queue.ordered ? (consumer.spec.maxPerKey ?? Number.MAX_SAFE_INTEGER) : 1;
    const expired: number[] = [];
    let taken = 0;
    while (taken < limit && room.messages > 0 && room.bytes > 0) {
      const entry = queue.takeNext();
      if (!entry) break;
      const retained = entry.message.publishTime >= retentionStart;
      // Its attempts reached maxDeliveryAttempts while it was revoked (see `fail`): to the dead-letter topic
      // instead of out again, as at its own expiry, if the policy still says so and its topic exists. Only
      // such a message: one counted past the limit before a policy was added or lowered is delivered once
      // more, as Pub/Sub does.
      if (retained && entry.deadLetter === 'due') {
        entry.deadLetter = undefined;
        if (this.forwardIfExhausted(entry)) continue;
      }
      const message = retained ? this.withPayload(entry) : undefined;
      if (!message) {
        // Past messageRetentionDuration (or compacted away for that reason): Pub/Sub drops it from the backlog.
        entry.acked = true;
        expired.push(entry.message.seq);
        continue;
      }
      const lease = this.leases.grant(queue, entry, now, deadline, consumer.id);
      if (entry.deliveries++ > 0) this.counters.redelivered++;
      this.counters.delivered++;
      const deliveryAttempt = this.deliveryAttempt(entry);
      // The stored form spares a PubsubMessage, its Date, id string and attributes copy per delivery.
      batch.push(
        stored
          ? { ackId: lease.ackId, message, deliveryAttempt, size: entry.size }
          : { ackId: lease.ackId, message: toPubsubMessage(message), deliveryAttempt },
      );
      taken++;
      room.messages--;
      room.bytes -= entry.size;
    }
    queue.affinity = consumer.affinity;
    // Acked entries passed over (exactly-once redelivery keeps them acked) may now be trimmed too.
    if (expired.length || queue.first()?.acked) {
      queue.trimAcked(this.dropped);
      if (expired.length) {
        this.persistAcks(expired);
        this.counters.retentionExpired += expired.length;
      }
      this.afterTrim(queue);
    }
    this.refresh(queue);
  }

  /**
   * Forwards `entry` to the dead-letter topic if its attempts reached the policy's maxDeliveryAttempts
   * and the topic exists; it is then acked for good (`deadLetter` 'sent'), in the store only once the
   * copy is durable in the dead-letter topic (a crash in between redelivers it).
   */
  private forwardIfExhausted(entry: Entry): boolean {
    const policy = this.spec.deadLetterPolicy;
    const forwarded = policy && entry.failures >= policy.maxDeliveryAttempts ? this.hooks.deadLetter(this, entry) : false;
    if (!forwarded) return false;
    this.counters.deadLettered++;
    entry.acked = true;
    entry.deadLetter = 'sent';
    forwarded.then(() => this.persistAcks([entry.message.seq]), this.hooks.onStoreError);
    return true;
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

  // ---- settling ----

  /**
   * Acks the ids whose lease is valid, in the order given; the others change nothing (`invalidAckIds`).
   * Resolves once the acks are durable.
   */
  async acknowledge(ackIds: string[]): Promise<AckResult> {
    const now = this.hooks.clock.now();
    const result: AckResult = { ackIds: [], invalidAckIds: [] };
    const seqs: number[] = [];
    // The ids seen so far, made only once an id has no valid lease: until then none repeated (an acked id's
    // lease is gone), and a Set per request of a stream's acks was ~2% of what its consume allocated.
    let seen: Set<string> | undefined;
    for (let i = 0; i < ackIds.length; i++) {
      const ackId = ackIds[i]!;
      const lease = this.validLease(ackId, now);
      if (!lease) {
        seen ??= new Set(ackIds.slice(0, i));
        if (!seen.has(ackId)) result.invalidAckIds.push(ackId);
        seen.add(ackId);
        continue;
      }
      seen?.add(ackId);
      result.ackIds.push(ackId);
      lease.entry.acked = true;
      this.leases.end(lease);
      lease.queue.trimAcked(this.dropped);
      this.refresh(lease.queue);
      this.afterTrim(lease.queue);
      seqs.push(lease.entry.message.seq);
      this.counters.acked++;
    }
    this.scheduleDispatch();
    if (seqs.length) await this.hooks.store.ack(this.name, seqs);
    return result;
  }

  /**
   * 0 seconds is a nack; otherwise the lease runs that long from now. Ids whose lease is not valid change
   * nothing (`invalidAckIds`). The leases are looked up first: a nack that revokes a later message of its
   * key (the redelivery rule) does not make that message's nack in the same request fail.
   */
  modifyAckDeadline(ackIds: string[], seconds: number, error?: string): AckResult {
    if (!Number.isInteger(seconds) || seconds < 0 || seconds > 600) {
      throw new InvalidArgumentError('ackDeadlineSeconds', `must be an integer between 0 and 600, got ${seconds}`);
    }
    const now = this.hooks.clock.now();
    const result: AckResult = { ackIds: [], invalidAckIds: [] };
    const valid: Lease[] = [];
    for (const ackId of new Set(ackIds)) {
      const lease = this.validLease(ackId, now);
      if (lease) valid.push(lease);
      else result.invalidAckIds.push(ackId);
    }
    for (const lease of valid) {
      if (this.leases.get(lease.ackId) !== lease) {
        // Revoked by an earlier id of this request (the redelivery rule): a nack's purpose is met, an extension's not.
        (seconds === 0 ? result.ackIds : result.invalidAckIds).push(lease.ackId);
        continue;
      }
      result.ackIds.push(lease.ackId);
      if (seconds === 0) this.fail(lease, 'nack', error);
      else this.leases.extend(lease, now + seconds * 1000);
    }
    this.scheduleDispatch();
    return result;
  }

  /**
   * Gives back deliveries that never reached their consumer's client (the call that was to carry them was
   * gone when its answer was written): each message, and the later ones of its key that are out, become
   * deliverable again at once as if never delivered — no failure, no backoff, the same deliveryAttempt
   * next time. Ids whose lease ended change nothing.
   */
  release(ackIds: string[]): void {
    // The attempt is not counted (its next delivery is no redelivery), but the delivered total stays: the
    // totals are Prometheus counters, and one that goes down reads as a reset to rate() and increase().
    const undeliver = (entry: Entry) => {
      entry.deliveries--;
    };
    for (const ackId of ackIds) {
      const lease = this.leases.get(ackId);
      if (!lease) continue;
      this.leases.end(lease);
      this.waitsAgain(lease.entry);
      undeliver(lease.entry);
      for (const later of lease.queue.rewindTo(lease.entry, this.exactlyOnce)) {
        this.leases.end(later.lease!);
        undeliver(later);
      }
      this.refresh(lease.queue);
    }
    this.scheduleDispatch();
  }

  isLive(ackId: string): boolean {
    return this.leases.get(ackId) !== undefined;
  }

  /**
   * The lease an ack id names, if it is still valid. On an exactly-once subscription a lease past its
   * deadline ends here (as the next tick would end it), so settling it fails instead of racing the tick.
   */
  private validLease(ackId: string, now: number): Lease | undefined {
    const lease = this.leases.get(ackId);
    if (lease && this.exactlyOnce && lease.deadline <= now) {
      this.expire(lease, now);
      return this.leases.get(ackId);
    }
    return lease;
  }

  /**
   * Expires leases past their deadline — or extends them, for consumers that asked the core to keep their
   * leases alive (within their keepAliveSeconds) — and releases keys whose backoff has passed.
   */
  tick(): void {
    const now = this.hooks.clock.now();
    for (const lease of this.leases.due(now)) {
      if (this.leases.get(lease.ackId) !== lease || lease.deadline > now) continue;
      this.expire(lease, now);
    }
    for (const queue of this.delayed) if (queue.notBefore <= now) this.refresh(queue);
    // Expiry must not wait for a consumer: the backlog and its oldest age count nothing past retention.
    const retentionStart = this.retentionStart(now);
    if (this.waitingSince < retentionStart) this.dropExpired(retentionStart);
    // The store's rows in their own turns (`load`), one subscription's step at a time.
    if (this.reader.expiryDue(retentionStart)) this.scheduleFill();
    this.scheduleDispatch();
  }

  /**
   * Drops the messages waiting in memory that were published before `before`, as `take` would when handing
   * them out: acked, so the key's later messages go on. At most EXPIRY_SLICE a tick; the rest in the next.
   */
  private dropExpired(before: number): void {
    let since = Infinity;
    let budget = EXPIRY_SLICE;
    const expired: number[] = [];
    for (const queue of this.queues()) {
      let entry = queue.peekNext();
      const from = expired.length;
      while (entry && entry.message.publishTime < before && budget > 0) {
        queue.takeNext();
        entry.acked = true;
        expired.push(entry.message.seq);
        budget--;
        entry = queue.peekNext();
      }
      if (expired.length > from) {
        queue.trimAcked(this.dropped);
        this.afterTrim(queue);
        this.refresh(queue);
      }
      if (budget === 0) {
        since = -Infinity;
        break;
      }
      if (entry && entry.message.publishTime < since) since = entry.message.publishTime;
    }
    this.waitingSince = since;
    if (expired.length) {
      this.persistAcks(expired);
      this.counters.retentionExpired += expired.length;
    }
  }

  /** A message handed out waits in memory again (its delivery failed or was given back). */
  private waitsAgain(entry: Entry): void {
    if (entry.message.publishTime < this.waitingSince) this.waitingSince = entry.message.publishTime;
  }

  /** A lease past its deadline: kept alive if its consumer asked for that (within keepAliveSeconds), else it fails. */
  private expire(lease: Lease, now: number): void {
    const keeper = this.keeper(lease, now);
    if (keeper) this.leases.extend(lease, now + (keeper.ackDeadlineSeconds ?? this.spec.ackDeadlineSeconds) * 1000);
    else this.fail(lease, 'expired');
  }

  /** The spec of the consumer that keeps `lease` alive past its deadline (keepAliveSeconds, counted from the delivery), if one does. */
  private keeper(lease: Lease, now: number): ConsumerSpec | undefined {
    const spec = this.consumers.get(lease.consumer)?.spec;
    return spec?.keepAliveSeconds !== undefined && now - lease.grantedAt < spec.keepAliveSeconds * 1000 ? spec : undefined;
  }

  /** Past its ack deadline, and not kept alive: the next tick would expire it. */
  private overdue(lease: Lease, now: number): boolean {
    return lease.deadline <= now && !this.keeper(lease, now);
  }

  /**
   * A delivery failed (nack or expiry). The message and, for an ordering key, every later message of
   * the key become deliverable again, in order, even later ones already acked (except on an exactly-once
   * subscription, where a confirmed ack is final); past maxDeliveryAttempts the message goes to the
   * dead-letter topic and the key moves on.
   */
  private fail(lease: Lease, cause: 'nack' | 'expired', error?: string): void {
    const { entry, queue } = lease;
    this.leases.end(lease);
    this.waitsAgain(entry);
    entry.failures++;
    if (error !== undefined) {
      entry.lastError = error;
      this.lastNackReason = { message: error, at: new Date(this.hooks.clock.now()).toISOString() };
    }
    this.counters[cause === 'nack' ? 'nacked' : 'expired']++;
    const now = this.hooks.clock.now();
    for (const later of queue.rewindTo(entry, this.exactlyOnce)) {
      const overdue = this.overdue(later.lease!, now);
      this.leases.end(later.lease!);
      // Revoked, but its own ack deadline had passed too (a consumer that stopped settling holds a key's
      // messages out together): that is an expiry of this message as well, which its deliveryAttempt counts.
      if (overdue) {
        later.failures++;
        this.counters.expired++;
        this.hooks.store.setFailures(this.name, later.message.seq, later.failures).catch(this.hooks.onStoreError);
        const policy = this.spec.deadLetterPolicy;
        if (policy && later.failures >= policy.maxDeliveryAttempts) later.deadLetter = 'due';
      }
    }
    this.hooks.store.setFailures(this.name, entry.message.seq, entry.failures).catch(this.hooks.onStoreError);
    if (this.forwardIfExhausted(entry)) {
      queue.skip(entry);
      queue.trimAcked(this.dropped);
      this.afterTrim(queue);
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
    for (const c of this.consumers.values()) if (c.affinity === affinity && c.spec.pipelined) return true;
    return false;
  }

  private persistAcks(seqs: number[]): void {
    this.hooks.store.ack(this.name, seqs).catch(this.hooks.onStoreError);
  }

  private *queues(): IterableIterator<KeyQueue> {
    yield* this.keyed.values();
    yield* this.loose;
  }

  /** Lowest seq the subscription may still deliver (in memory, or still to be read), for compaction. */
  lowestHeldSeq(): number | undefined {
    let low = this.reader.lowestUnread();
    for (const q of this.queues()) {
      const seq = q.first()?.message.seq;
      if (seq !== undefined && (low === undefined || seq < low)) low = seq;
    }
    return low;
  }

  /**
   * See BacklogReader.countRest. Hot keys only where the running core has them (ordered subscriptions) and
   * the store's count is what will be delivered (no filter: the store's count per key does not apply it).
   */
  countBacklog(hotKeys = 0): void {
    this.reader.countRest(this.retentionStart(), this.spec.enableMessageOrdering && !this.spec.filter ? hotKeys : 0);
  }

  /** Publish time before which the rows the backlog reader has not read are out of its count (see BacklogReader.passedBefore). */
  get expiredBefore(): number {
    return this.reader.passedBefore;
  }

  metrics(topN = 10): SubscriptionMetrics {
    let backlogMessages = 0;
    let backlogBytes = 0;
    let oldest: number | undefined;
    const perKey = new Map<string, number>();
    for (const q of this.queues()) {
      let n = 0;
      for (const e of q.entries()) {
        if (e.acked) continue;
        n++;
        backlogBytes += e.size;
        if (oldest === undefined || e.message.publishTime < oldest) oldest = e.message.publishTime;
      }
      backlogMessages += n;
      if (q.ordered && n > 0) perKey.set(q.key, n);
    }
    for (const [key, waiting] of this.reader.waitingPerKey()) perKey.set(key, (perKey.get(key) ?? 0) + waiting);
    const waiting = this.reader.waiting;
    if (waiting > 0) {
      // Not in memory: their sizes are estimated from the ones that are.
      backlogBytes += backlogMessages ? Math.round((backlogBytes / backlogMessages) * waiting) : 0;
      backlogMessages += waiting;
      if (oldest === undefined) oldest = this.reader.oldestUnreadPublishTime();
    }
    const topKeys = [...perKey]
      .map(([orderingKey, backlog]) => ({ orderingKey, backlog }))
      .sort((a, b) => b.backlog - a.backlog || (a.orderingKey < b.orderingKey ? -1 : 1))
      .slice(0, topN);
    return {
      backlogMessages,
      backlogBytes,
      residentBytes: this.resident,
      heldMessages: this.held,
      windowMessages: this.window,
      outstandingMessages: this.leases.size,
      oldestUnackedPublishTime: oldest,
      topKeys,
      counters: { ...this.counters },
      lastNackReason: this.lastNackReason,
    };
  }

  /**
   * A seek begins: every lease ends and what is in memory is dropped now, not when the seek is done
   * (`reset`). An ack arriving while the store seeks finds its lease gone; accepted, its write would land
   * after the seek's and undo the replay of that message (an exactly-once subscription reported it acked).
   * Returns the cursor to read the backlog again from (`reset`) should the seek fail.
   */
  suspendForSeek(): number {
    const low = this.lowestHeldSeq();
    const resumeFrom = low === undefined ? this.reader.lookedAt : low - 1;
    this.forget();
    return resumeFrom;
  }

  /** Forgets what is in memory and reads the backlog again from `lowSeq` (seek); consumers stay attached. */
  reset(lowSeq: number, lastSeq: number): void {
    this.forget();
    for (const c of this.consumers.values()) c.spec.sought?.();
    this.reader.reset(lowSeq, lastSeq);
    this.load();
  }

  private forget(): void {
    this.leases.endAll();
    this.hooks.payloads.give(this.resident);
    this.resident = 0;
    this.held = 0;
    this.waitingSince = Infinity;
    this.keyed.clear();
    this.loose.clear();
    this.ready.clear();
    this.delayed.clear();
    this.refillKeys.clear();
  }

  /**
   * The subscription is gone (deleted, detached, or the core closes): consumers are told why, leases become
   * stale, and attaching again fails with `reason`.
   */
  close(reason: OrderlyError = new NotFoundError('Subscription', this.name)): void {
    if (this.closed) return;
    this.forget();
    this.closed = true;
    this.closedBy = reason;
    const consumers = [...this.consumers.values()];
    this.consumers.clear();
    for (const c of consumers) c.spec.detached?.(reason);
  }
}

/**
 * A delivery's message. Its attributes are its own: the stored message is shared by every subscription of
 * the topic and by its redeliveries, and a handler that added an attribute changed what the others
 * received. `data` stays shared (a copy per delivery would double the payload bytes moved).
 */
export function toPubsubMessage(m: StoredMessage): PubsubMessage {
  return {
    messageId: String(m.seq),
    publishTime: new Date(m.publishTime),
    data: m.data,
    attributes: { ...m.attributes },
    orderingKey: m.orderingKey,
    sequence: m.keySeq,
  };
}
