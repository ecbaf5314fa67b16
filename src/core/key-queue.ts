import type { Entry as DeliveryEntry, Lease as DeliveryLease } from './delivery.js';

/** One message in this queue's window. */
export type Entry = DeliveryEntry<KeyQueue>;
/** One delivery of a message of this queue. */
export type Lease = DeliveryLease<KeyQueue>;

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

  /** The next undelivered entry, not handed out yet; acked ones (see `rewindTo`) are passed over. */
  peekNext(): Entry | undefined {
    while (this.next < this.items.length && this.items[this.next]!.acked) this.next++;
    return this.items[this.next];
  }

  /** Hands out the next undelivered entry, or undefined. */
  takeNext(): Entry | undefined {
    const entry = this.peekNext();
    if (entry) this.next++;
    return entry;
  }

  /**
   * Makes `entry` and every later entry of the window deliverable again (Pub/Sub's ordered redelivery
   * rule); returns the later entries that were out, so their leases can be revoked. With `keepAcked`
   * (exactly-once delivery: a confirmed ack is never undone) the later entries already acked stay acked.
   * A dead-lettered entry stays acked either way: it went to the dead-letter topic instead.
   */
  rewindTo(entry: Entry, keepAcked = false): Entry[] {
    const at = this.items.indexOf(entry, this.head);
    if (at < 0) return [];
    const revoked: Entry[] = [];
    for (let i = at + 1; i < this.next; i++) {
      const later = this.items[i]!;
      if (!keepAcked && later.deadLetter !== 'sent') later.acked = false;
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
    // Dropped entries (and their payloads) must not stay reachable through `items`: a key that keeps
    // getting messages never goes idle, and would keep every message it ever delivered. Copying once
    // half is dropped keeps that bounded at no more than the window, for O(1) per entry amortised.
    if (this.head > 0 && this.head * 2 >= this.items.length) {
      this.items = this.items.slice(this.head);
      this.next -= this.head;
      this.head = 0;
    }
  }
}
