import type { Store, StoredMessage } from '../store/store.js';
import type { Clock } from './clock.js';
import type { ValidMessage } from './limits.js';

/** Keys whose last sequence is remembered in memory; older ones are looked up in the store again. */
const KEY_CACHE = 100_000;
const NO_KEYS = new Map<string, number>();
/** The seq of the first message of a store: seqs count from 1 (an empty store's last is 0). */
export const FIRST_SEQ = 1;

/**
 * Hands out the store-wide sequence (the message id, publish order) and each ordering key's own
 * sequence, synchronously and strictly in call order, so a key's sequence order is its publish order.
 * A key's last sequence is cached for a bounded number of keys (the longest-cached go first): memory does
 * not grow with the number of keys ever published. A key is forgotten only once its last message is committed, so the store's answer
 * for it is never stale.
 */
export class SequenceAllocator {
  /** Per topic uid: ordering key -> its last key sequence and the seq that carried it. */
  private readonly keys = new Map<number, Map<string, { keySeq: number; seq: number }>>();
  /**
   * Topics created since the store opened, none of whose keys has been forgotten: every key's last
   * sequence is in `keys`, so a key not there has none, and the store need not be asked. Under Google's
   * client (one Publish call per message) a new key's query was ~7% of `orderly serve`'s main thread for
   * the seconds every key is new, the latency benchmark's cold start.
   */
  private readonly complete = new Set<number>();
  private cached = 0;
  private lastPublishTime = 0;
  /** Every message up to this seq is committed. */
  private durable: number;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private lastSeq: number,
    private readonly keyCache = KEY_CACHE,
  ) {
    this.durable = lastSeq;
  }

  get last(): number {
    return this.lastSeq;
  }

  /** A topic just created: it has no messages yet (topic uids are never reused). */
  created(topicUid: number): void {
    this.complete.add(topicUid);
  }

  allocate(topicUid: number, messages: ValidMessage[]): StoredMessage[] {
    const publishTime = (this.lastPublishTime = Math.max(this.lastPublishTime, this.clock.now()));
    let keys = this.keys.get(topicUid);
    if (!keys) this.keys.set(topicUid, (keys = new Map<string, { keySeq: number; seq: number }>()));
    const looked = this.lookUpNewKeys(topicUid, keys, messages);
    const stored = new Array<StoredMessage>(messages.length);
    for (let i = 0; i < messages.length; i++) {
      const m = messages[i]!;
      const seq = ++this.lastSeq;
      let known = keys.get(m.orderingKey);
      if (known) {
        known.keySeq++;
        known.seq = seq;
      } else {
        known = { keySeq: (looked.get(m.orderingKey) ?? 0) + 1, seq };
        keys.set(m.orderingKey, known);
        this.cached++;
      }
      stored[i] = { seq, topicUid, orderingKey: m.orderingKey, keySeq: known.keySeq, publishTime, data: m.data, attributes: m.attributes };
    }
    if (this.cached > this.keyCache) this.evict();
    return stored;
  }

  /** The store's last key sequence of each key of the batch not cached, in one query. */
  private lookUpNewKeys(topicUid: number, keys: Map<string, unknown>, messages: ValidMessage[]): Map<string, number> {
    if (this.complete.has(topicUid)) return NO_KEYS;
    const unknown = new Set<string>();
    for (const m of messages) if (!keys.has(m.orderingKey)) unknown.add(m.orderingKey);
    return unknown.size ? this.store.lastKeySeqs(topicUid, [...unknown]) : NO_KEYS;
  }

  /** Messages up to `seq` are committed (appends commit in sequence order). */
  committed(seq: number): void {
    if (seq > this.durable) this.durable = seq;
  }

  /** Forgets the longest-cached keys whose last message is committed (a Map iterates in insertion order). */
  private evict(): void {
    for (const [topicUid, keys] of this.keys) {
      for (const [key, v] of keys) {
        if (this.cached <= this.keyCache * 0.9) return;
        if (v.seq > this.durable) continue;
        keys.delete(key);
        this.complete.delete(topicUid);
        this.cached--;
      }
    }
  }
}
