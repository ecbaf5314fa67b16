import type { Entry, Lease } from './delivery.js';

/** The form of every ack id a LeaseManager issues: its prefix (base 36, see the constructor), the message's seq, a counter. */
const ACK_ID_FORM = /^[0-9a-z]+-\d+-\d+$/;

/** False for an id no LeaseManager could have issued (malformed), whether or not its lease is still out. */
export function isAckIdForm(ackId: string): boolean {
  return ACK_ID_FORM.test(ackId);
}

/** What a lease is held in: the key's queue, which counts its deliveries out. */
interface LeaseQueue {
  outstanding: number;
}

/**
 * Server-side leases: which delivery (ack id) is out, until when, to whom. An ack id names one delivery;
 * once its lease ends (ack, nack, expiry, or revocation by an earlier message's redelivery) it is stale,
 * and acks or modacks that name it are accepted and ignored, as Pub/Sub does.
 */
export class LeaseManager<Q extends LeaseQueue> {
  /**
   * By the ack id's counter (its last part), not the id: a string key is hashed, and a fresh id flattened
   * first, at every grant and every ack, ~6% of a StreamingPull consume's main thread (docs/benchmarks.md).
   */
  private readonly leases = new Map<number, Lease<Q>>();
  /** Per consumer: its leases, and their messages' bytes. */
  private readonly perConsumer = new Map<string, { messages: number; bytes: number }>();
  private counter = 0;
  private earliest = Infinity;

  /** Ack ids begin with this: the subscription's name hashed, and when its runtime was made (ids stay unique across restarts). */
  private readonly prefix: string;

  constructor(subscription: string, now: number) {
    this.prefix = `${shortHash(subscription)}${now.toString(36)}`;
  }

  get size(): number {
    return this.leases.size;
  }

  grant(queue: Q, entry: Entry<Q>, now: number, deadline: number, consumer: string): Lease<Q> {
    const serial = ++this.counter;
    const lease: Lease<Q> = {
      ackId: `${this.prefix}-${entry.message.seq}-${serial}`,
      serial,
      queue,
      entry,
      deadline,
      consumer,
      grantedAt: now,
    };
    this.leases.set(serial, lease);
    entry.lease = lease;
    queue.outstanding++;
    const held = this.perConsumer.get(consumer);
    if (held) {
      held.messages++;
      held.bytes += entry.size;
    } else this.perConsumer.set(consumer, { messages: 1, bytes: entry.size });
    if (deadline < this.earliest) this.earliest = deadline;
    return lease;
  }

  /** Leases out to one consumer (flow control for consumers that are not told of acks, like streams). */
  countFor(consumer: string): number {
    return this.perConsumer.get(consumer)?.messages ?? 0;
  }

  /** The bytes of the messages leased out to one consumer (see countFor). */
  bytesFor(consumer: string): number {
    return this.perConsumer.get(consumer)?.bytes ?? 0;
  }

  get(ackId: string): Lease<Q> | undefined {
    const lease = this.leases.get(serialOf(ackId));
    // Another subscription's (or runtime's) id may end in the same counter: the whole id must match.
    return lease !== undefined && lease.ackId === ackId ? lease : undefined;
  }

  extend(lease: Lease<Q>, deadline: number): void {
    lease.deadline = deadline;
    if (deadline < this.earliest) this.earliest = deadline;
  }

  end(lease: Lease<Q>): void {
    if (!this.leases.delete(lease.serial)) return;
    if (lease.entry.lease === lease) lease.entry.lease = undefined;
    lease.queue.outstanding--;
    const held = this.perConsumer.get(lease.consumer)!;
    held.bytes -= lease.entry.size;
    if (--held.messages === 0) this.perConsumer.delete(lease.consumer);
  }

  /** Leases past their deadline, oldest deadline first. Cheap when nothing is due. */
  due(now: number): Lease<Q>[] {
    if (now < this.earliest) return [];
    const due: Lease<Q>[] = [];
    let earliest = Infinity;
    for (const lease of this.leases.values()) {
      if (lease.deadline <= now) due.push(lease);
      else if (lease.deadline < earliest) earliest = lease.deadline;
    }
    this.earliest = earliest;
    return due.sort((a, b) => a.deadline - b.deadline || a.entry.message.seq - b.entry.message.seq);
  }

  endAll(): void {
    for (const lease of [...this.leases.values()]) this.end(lease);
  }
}

/** The counter an ack id ends in (digits after its last '-'), or -1 if it ends otherwise. */
function serialOf(ackId: string): number {
  let serial = 0;
  let scale = 1;
  for (let i = ackId.length - 1; i >= 0; i--) {
    const digit = ackId.charCodeAt(i) - 48;
    if (digit >= 0 && digit <= 9 && scale <= Number.MAX_SAFE_INTEGER / 10) {
      serial += digit * scale;
      scale *= 10;
    } else return ackId.charCodeAt(i) === 45 && scale > 1 ? serial : -1;
  }
  return -1;
}

/** FNV-1a of `s`, in base 36. */
function shortHash(s: string): string {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
  return (h >>> 0).toString(36);
}
