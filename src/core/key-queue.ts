import type { StoredMessage } from '../store/store.js';
import type { Lease } from './lease-manager.js';

export interface Entry {
  /** Without its payload when `spilled` (the store has it). */
  message: StoredMessage;
  /** Left out of memory to stay within the subscription's payload budget; read back when delivered. */
  spilled: boolean;
  /** Pub/Sub's size of the message (payload included): flow control and backlog bytes. */
  size: number;
  acked: boolean;
  /** Nacks + expiries so far; drives deliveryAttempt, backoff and dead-lettering. */
  failures: number;
  lease?: Lease;
  /** Times handed out so far (any cause); above 0 the next delivery is a redelivery. */
  deliveries: number;
  /** Why the last delivery failed, when a sink said so (becomes CloudPubSubDeadLetterSourceDeliveryErrorMessage). */
  lastError?: string;
}

/**
 * The delivery window of one ordering key (or of one loose message, on unordered subscriptions and for
 * the empty key): the entries from the first unacked one onward. Entries before `delivered` have been
 * handed out (outstanding, or acked while an earlier one was still out); the rest wait.
 */
export class KeyQueue {
  private items: Entry[] = [];
  private head = 0;
  /** Absolute index (into items) of the first entry not yet handed out. */
  private next = 0;
  outstanding = 0;
  /** Not deliverable before this time (retry backoff). */
  notBefore = 0;
  /** The consumer that last received this key: kept while it has outstanding messages (affinity). */
  affinity?: string;

  constructor(
    readonly key: string,
    readonly ordered: boolean,
  ) {}

  push(entry: Entry): void {
    this.items.push(entry);
  }

  get size(): number {
    return this.items.length - this.head;
  }

  get hasUndelivered(): boolean {
    return this.next < this.items.length;
  }

  get isIdle(): boolean {
    return this.size === 0 && this.outstanding === 0;
  }

  /** Entries from the head, oldest first. */
  *entries(): IterableIterator<Entry> {
    for (let i = this.head; i < this.items.length; i++) yield this.items[i]!;
  }

  first(): Entry | undefined {
    return this.items[this.head];
  }

  /** Hands out the next undelivered entry, or undefined; acked ones (see `rewindTo`) are passed over. */
  takeNext(): Entry | undefined {
    while (this.next < this.items.length && this.items[this.next]!.acked) this.next++;
    if (this.next >= this.items.length) return undefined;
    return this.items[this.next++];
  }

  /**
   * Makes `entry` and every later entry of the window deliverable again (Pub/Sub's ordered redelivery
   * rule); returns the later entries that were out, so their leases can be revoked. With `keepAcked`
   * (exactly-once delivery: a confirmed ack is never undone) the later entries already acked stay acked.
   */
  rewindTo(entry: Entry, keepAcked = false): Entry[] {
    const at = this.items.indexOf(entry, this.head);
    if (at < 0) return [];
    const revoked: Entry[] = [];
    for (let i = at + 1; i < this.next; i++) {
      const later = this.items[i]!;
      if (!keepAcked) later.acked = false;
      if (later.lease) revoked.push(later);
    }
    this.next = at;
    return revoked;
  }

  /** Moves past `entry` without redelivering it (it was dead-lettered). */
  skip(entry: Entry): void {
    const at = this.items.indexOf(entry, this.head);
    if (at >= 0 && this.next <= at) this.next = at + 1;
  }

  /** Drops the acked entries at the head (each passed to `dropped`); the key's cursor moves forward. */
  trimAcked(dropped: (entry: Entry) => void): void {
    while (this.head < this.next && this.items[this.head]!.acked) dropped(this.items[this.head++]!);
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.next -= this.head;
      this.head = 0;
    }
  }
}
