import type { Store, StoredMessage } from '../store/store.js';
import type { Clock } from './clock.js';
import type { ValidMessage } from './limits.js';

/** Keys whose last sequence is remembered in memory; older ones are looked up in the store again. */
const KEY_CACHE = 100_000;

/**
 * Hands out the store-wide sequence (the message id, publish order) and each ordering key's own
 * sequence, synchronously and strictly in call order, so a key's sequence order is its publish order.
 * A key's last sequence is cached for recently used keys only: memory does not grow with the number of
 * keys ever published. A key is forgotten only once its last message is committed, so the store's answer
 * for it is never stale.
 */
export class SequenceAllocator {
  private readonly keys = new Map<string, { keySeq: number; seq: number }>();
  private lastPublishTime = 0;
  /** Every message up to this seq is committed. */
  private durable: number;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private lastSeq: number,
  ) {
    this.durable = lastSeq;
  }

  get last(): number {
    return this.lastSeq;
  }

  allocate(topicUid: number, messages: ValidMessage[]): StoredMessage[] {
    const publishTime = (this.lastPublishTime = Math.max(this.lastPublishTime, this.clock.now()));
    const stored = messages.map((m) => {
      const k = `${topicUid}\u0000${m.orderingKey}`;
      const known = this.keys.get(k);
      const keySeq = (known ? known.keySeq : this.store.lastKeySeq(topicUid, m.orderingKey)) + 1;
      const seq = ++this.lastSeq;
      // Re-inserted so the Map's order is least recently used first.
      this.keys.delete(k);
      this.keys.set(k, { keySeq, seq });
      return { seq, topicUid, orderingKey: m.orderingKey, keySeq, publishTime, data: m.data, attributes: m.attributes };
    });
    this.evict();
    return stored;
  }

  /** Messages up to `seq` are committed (appends commit in sequence order). */
  committed(seq: number): void {
    if (seq > this.durable) this.durable = seq;
  }

  private evict(): void {
    if (this.keys.size <= KEY_CACHE) return;
    for (const [k, v] of this.keys) {
      if (this.keys.size <= KEY_CACHE || v.seq > this.durable) return;
      this.keys.delete(k);
    }
  }
}
