import type { BacklogRow, BacklogSource, Store } from '../store/store.js';
import type { Filter } from './filter.js';
import { SLICE_MS } from './loop-slice.js';

/** What the reader needs of the subscription it fills. */
export interface BacklogSink {
  readonly ordered: boolean;
  /** Exactly-once delivery: an ack, once confirmed, is final, so acked rows are never delivered again. */
  readonly exactlyOnce: boolean;
  /** Messages the subscription may still take into memory now. */
  room(): number;
  /** Messages of this ordering key in memory now. */
  keyLoad(orderingKey: string): number;
  /** Messages of one ordering key the subscription may keep in memory (its share of the window). */
  keyShare(): number;
  /**
   * The subscription's filter, if it has one: only the messages it matches are in the backlog (and
   * counted); the others are acked when read, and never delivered.
   */
  readonly matching: Filter | undefined;
  /** Takes a message `matching` accepts into memory (`row.acked` rows come as redeliveries of the key). */
  admit(row: BacklogRow): void;
  /** Acks an unacked message `matching` refuses: it is never delivered. */
  skip(row: BacklogRow): void;
  /** Payload bytes that may still be read into memory. */
  payloadRoom(): number;
  /** `count` unacked messages (that `matching` accepts) were passed unread, past retention. */
  expiredUnread(count: number): void;
}

interface Overflow {
  /** The key's first message still in the store (by its per-key sequence, and its seq for compaction). */
  fromKeySeq: number;
  fromSeq: number;
  /** How many of its messages wait in the store. */
  waiting: number;
}

/** Rows per query: small enough that a fill stops close to its time budget. */
const READ_CHUNK = 250;
/**
 * Seqs counted per step in the background, one step a turn. 50,000 took 6 ms a step on a 1M backlog
 * (9 ms in a StreamingPull drain's first second, beside the other parts' slices); 10,000 take ~1.2 ms,
 * within a slice (SLICE_MS).
 */
const COUNT_RANGE = 10_000;
/**
 * The same for a filtered subscription, whose count reads each unacked row's attributes (never its
 * payload) and applies the filter, as SQL cannot for every filter: 10,000 rows took 13.6 ms a step on the
 * 2-core machine, 2,500 take 2.6 ms, about a slice. A whole count (offline status) costs ~5 s per million
 * rows, against ~0.1 s unfiltered.
 */
const FILTERED_COUNT_RANGE = 2_500;
/**
 * Rows an expiry step passes at most (`expireSome`), unfiltered: it reads each row's publish time, then
 * counts the range's unacked rows, twice a count step's work, so half its range. On a 1M expired backlog
 * with no consumer a step took 1.7 ms (median; 5.5 ms at the 99th percentile on the shared 2-core machine).
 */
const EXPIRY_RANGE = COUNT_RANGE / 2;

/**
 * Reads one subscription's backlog from the store lazily, so memory holds a window of it, never all of
 * it. Messages are read in publish order from a cursor; while the subscription is caught up (`behind`
 * false) new publishes go straight into memory instead. A key over its share of the window
 * (`messagesPerKey`) overflows: its later messages are left in the store and read back per key once it
 * drains, so one blocked key cannot stop the others.
 *
 * After a restart or seek the rows carry the stored ack state: an acked row is skipped, unless an earlier
 * message of its key is unacked — then it is delivered again, Pub/Sub's ordered redelivery rule applied to
 * the deliveries the restart interrupted (`resumed`). On an exactly-once subscription an acked row stays
 * acked: a confirmed ack is final there.
 */
export class BacklogReader {
  /** Every message of the topic with seq <= cursor has been looked at (taken, skipped, or left to its key's overflow). */
  private cursor: number;
  private behind = true;
  /**
   * Unacked messages after the cursor that are counted, of a filtered subscription only those that match
   * (acked ones a restart delivers again count once read). Rows up to `restartSeq` are counted in the
   * background a range at a time (`countSome`: counting a large backlog at once would stall the event
   * loop), later ones as they are published.
   */
  private unread = 0;
  private countedUpTo: number;
  /**
   * Filtered subscriptions: the seq of the oldest unread message that matches, when it is known (for the
   * oldest-unacked age; an unfiltered subscription takes the next row's). Counting finds them in seq order;
   * once the reader has passed it, the next one is known only if none was counted before it.
   */
  private firstMatch?: number;
  private readonly overflow = new Map<string, Overflow>();
  private readonly resumed = new Set<string>();
  /** Rows up to here were published before this start (or seek); only they can be acked before being read. */
  private restartSeq: number;
  /** The unread rows' hottest keys as `countRest` found them, valid while the cursor stays where it was then. */
  private unreadKeys?: { cursor: number; keys: { orderingKey: string; backlog: number }[] };
  /**
   * Every row after the cursor was published at or after this, as far as expiry (`expireSome`) knows: none
   * of them is past retention before retention passes it, and compaction may delete by retention what was
   * published before it without the count going wrong (`passedBefore`).
   */
  private publishedFrom = -Infinity;

  constructor(
    private readonly store: Store,
    private readonly source: BacklogSource,
    private readonly sink: BacklogSink,
    lowSeq: number,
    lastSeq: number,
  ) {
    this.cursor = lowSeq;
    this.restartSeq = lastSeq;
    this.countedUpTo = lowSeq;
    this.countSome();
  }

  /** Back to `lowSeq` after a seek: everything after it is read again from the store. */
  reset(lowSeq: number, lastSeq: number): void {
    this.cursor = lowSeq;
    this.restartSeq = lastSeq;
    this.behind = true;
    this.overflow.clear();
    this.resumed.clear();
    this.unreadKeys = undefined;
    this.unread = 0;
    this.firstMatch = undefined;
    this.countedUpTo = lowSeq;
    this.publishedFrom = -Infinity;
    this.countSome();
  }

  /**
   * Moves the cursor past the next range of unread rows published before `before` (past the
   * subscription's retention) and takes them out of the count: with nobody reading, they would otherwise
   * stay in the backlog for good. Only a run from the cursor on: a row still live ends it, so no live row is
   * ever passed (publish times rise with seqs; one out of order waits for its turn to be read). True while
   * more may be expired now.
   */
  expireSome(before: number): boolean {
    if (!this.expiryDue(before)) return false;
    const run = this.store.expiredRun(this.source.topicUid, this.cursor, before, this.sink.matching ? FILTERED_COUNT_RANGE : EXPIRY_RANGE);
    if (run.upTo > this.cursor) this.pass(run.upTo);
    this.publishedFrom = run.more ? -Infinity : (run.liveFrom ?? before);
    return run.more;
  }

  /** Rows after the cursor may be past retention at `before`: an `expireSome` step is due. */
  expiryDue(before: number): boolean {
    return this.behind && before > this.publishedFrom;
  }

  /** Publish time before which no row after the cursor is in the count (for compaction); any time while caught up. */
  get passedBefore(): number {
    return this.behind ? this.publishedFrom : Infinity;
  }

  /**
   * The rows up to `upTo` expired unread: the counted ones leave the count, and none is read. The sink is
   * told how many there were, counted or not yet (the background count may not have reached them).
   */
  private pass(upTo: number): void {
    const from = this.cursor;
    // Three disjoint ranges, each read once: counted in the background, not counted yet, published since the start.
    const counted = this.countIn(from, Math.min(upTo, this.countedUpTo)) + this.countIn(Math.max(from, this.restartSeq), upTo);
    const uncounted = this.countIn(Math.max(from, this.countedUpTo), Math.min(upTo, this.restartSeq));
    this.sink.expiredUnread(counted + uncounted);
    this.unread = Math.max(0, this.unread - counted);
    this.cursor = upTo;
    if (this.firstMatch !== undefined && this.firstMatch <= upTo) this.firstMatch = undefined;
    if (this.cursor >= this.restartSeq) this.resumed.clear();
  }

  /** The unacked rows with from < seq <= to that the count has (of a filtered subscription, those that match). */
  private countIn(from: number, to: number): number {
    if (to <= from) return 0;
    const matching = this.sink.matching;
    if (!matching) return this.store.countUnacked(this.source, from, to);
    let n = 0;
    for (const row of this.store.unackedAttributes(this.source, from, to)) if (matching(row.attributes)) n++;
    return n;
  }

  /** Counts the next range of the backlog's unacked messages (for the metric); true while more remain. */
  countSome(): boolean {
    if (this.countedUpTo >= this.restartSeq) return false;
    const matching = this.sink.matching;
    const from = Math.max(this.countedUpTo, this.cursor);
    const to = Math.min(from + (matching ? FILTERED_COUNT_RANGE : COUNT_RANGE), this.restartSeq);
    if (to > from && !matching) this.unread += this.store.countUnacked(this.source, from, to);
    else if (to > from && matching)
      for (const row of this.store.unackedAttributes(this.source, from, to)) if (matching(row.attributes)) this.matched(row.seq);
    this.countedUpTo = to;
    return to < this.restartSeq;
  }

  /** A matching message not read yet is counted (filtered subscriptions). */
  private matched(seq: number): void {
    if (this.firstMatch === undefined ? this.unread === 0 : seq < this.firstMatch) this.firstMatch = seq;
    this.unread++;
  }

  private matches(row: BacklogRow): boolean {
    return this.sink.matching?.(row.message.attributes) ?? true;
  }

  /** The row is in the count: counted in the background already, or published after the start. */
  private counted(seq: number): boolean {
    return seq <= this.countedUpTo || seq > this.restartSeq;
  }

  get isBehind(): boolean {
    return this.behind;
  }

  /**
   * A message just published (and durable). It goes into memory only if the subscription is caught up
   * and has room; otherwise it stays in the store and is read in its turn. True if it was taken.
   */
  offer(row: BacklogRow): boolean {
    const { seq, orderingKey } = row.message;
    if (seq <= this.cursor) return false; // already read from the store
    const matches = this.matches(row);
    if (this.behind || this.sink.room() <= 0) {
      this.behind = true;
      if (seq > this.restartSeq && matches) this.matched(seq);
      return false;
    }
    this.cursor = seq;
    this.consider(row, orderingKey, matches);
    return true;
  }

  /**
   * Reads from the store until the window is full, the backlog is exhausted, or `maxMs` passed (rows
   * skipped as acked cost time too, so a long read yields to the event loop). True if there is more to read.
   */
  fill(maxMs = SLICE_MS): boolean {
    const until = performance.now() + maxMs;
    while (this.behind) {
      const room = this.sink.room();
      if (room <= 0) return false;
      if (performance.now() > until) return true;
      const limit = Math.min(room, READ_CHUNK);
      const rows = this.store.scan(this.source, this.cursor, limit, this.sink.payloadRoom());
      for (const row of rows) {
        this.cursor = row.message.seq;
        const matches = this.matches(row);
        if (!row.acked && matches && this.counted(row.message.seq) && this.unread > 0) this.unread--;
        this.consider(row, row.message.orderingKey, matches);
      }
      if (this.firstMatch !== undefined && this.firstMatch <= this.cursor) this.firstMatch = undefined;
      if (rows.length < limit) {
        // Everything is in memory: nothing is left to count either.
        this.behind = false;
        this.unread = 0;
        this.countedUpTo = Math.max(this.countedUpTo, this.restartSeq);
      }
      if (this.cursor >= this.restartSeq) this.resumed.clear();
    }
    return false;
  }

  /** The key has messages left in the store because it was over its share of the window. */
  overflows(orderingKey: string): boolean {
    return this.overflow.has(orderingKey);
  }

  /** Reads an overflowing key's next messages back into memory; false if the window has no room for them now. */
  refillKey(orderingKey: string): boolean {
    const over = this.overflow.get(orderingKey);
    if (!over) return true;
    const limit = Math.min(this.sink.keyShare() - this.sink.keyLoad(orderingKey), this.sink.room());
    if (limit <= 0) return false;
    const rows = this.store.scanKey(this.source, orderingKey, over.fromKeySeq, this.cursor, limit, this.sink.payloadRoom());
    // Every row here is after one the key still owes, so acked ones are delivered again too (not on
    // exactly-once). `waiting` counts the rows the filter matches (consider); the others are only acked.
    let matched = 0;
    for (const row of rows) {
      if (!this.matches(row)) {
        if (!row.acked) this.sink.skip(row);
        continue;
      }
      matched++;
      if (!row.acked || !this.sink.exactlyOnce) this.sink.admit(row);
    }
    const last = rows[rows.length - 1];
    if (rows.length < limit || !last) this.overflow.delete(orderingKey);
    else {
      over.fromKeySeq = last.message.keySeq + 1;
      over.fromSeq = last.message.seq + 1;
      over.waiting = Math.max(0, over.waiting - matched);
    }
    return true;
  }

  private consider(row: BacklogRow, key: string, matches: boolean): void {
    // Never delivered, so neither in the backlog nor in its key's order: acked now, it waits for nothing.
    if (!matches) {
      if (!row.acked) this.sink.skip(row);
      return;
    }
    const keyed = this.sink.ordered && key !== '';
    if (keyed) {
      const over = this.overflow.get(key);
      if (over) {
        over.waiting++;
        return;
      }
    }
    if (row.acked) {
      if (!keyed || !this.resumed.has(key) || this.sink.exactlyOnce) return;
    } else if (keyed && row.message.seq <= this.restartSeq) {
      this.resumed.add(key);
    }
    if (keyed && this.sink.keyLoad(key) >= this.sink.keyShare()) {
      this.overflow.set(key, { fromKeySeq: row.message.keySeq, fromSeq: row.message.seq, waiting: 1 });
      return;
    }
    this.sink.admit(row);
  }

  /**
   * Counts the rest of the start's (or seek's) backlog now, those published before `before` expired first,
   * so `waiting` is exact (~0.1 s per million messages), and with `hotKeys` its hottest keys that are not
   * read yet (~0.3 s per million): a core that reads nothing (offline status) knows no key otherwise, a
   * running one only the keys in its window.
   */
  countRest(before: number, hotKeys = 0): void {
    while (this.expireSome(before));
    while (this.countSome());
    if (hotKeys > 0 && this.behind)
      this.unreadKeys = { cursor: this.cursor, keys: this.store.unackedByKey(this.source, this.cursor, this.restartSeq, hotKeys) };
  }

  /**
   * Messages not in memory: unread ones and overflowing keys' (for the backlog metric). While the backlog
   * of a start is still being counted, the seqs not counted yet are in it as they are: an upper bound for a
   * moment (they may be acked, or another topic's), so that a backlog still in the store never reads 0. A
   * process that waited for an empty backlog stopped early on that, its first counted range all acked.
   */
  get waiting(): number {
    let n = this.unread + (this.behind ? Math.max(0, this.restartSeq - Math.max(this.countedUpTo, this.cursor)) : 0);
    for (const o of this.overflow.values()) n += o.waiting;
    return n;
  }

  /** Per key, how many of its messages wait in the store: overflowing keys, and the hottest unread ones once counted (hot-key metric). */
  *waitingPerKey(): IterableIterator<[string, number]> {
    for (const [key, o] of this.overflow) yield [key, o.waiting];
    // Unread rows are after the cursor, overflowing ones before it: no message counts twice.
    if (this.behind && this.unreadKeys?.cursor === this.cursor) for (const k of this.unreadKeys.keys) yield [k.orderingKey, k.backlog];
  }

  /** The last seq looked at: every message of the topic up to it was taken, skipped, or left to its key's overflow. */
  get lookedAt(): number {
    return this.cursor;
  }

  /** The lowest seq still in the store that this subscription has not taken into memory, if any. */
  lowestUnread(): number | undefined {
    let low = this.behind ? this.cursor + 1 : undefined;
    for (const o of this.overflow.values()) if (low === undefined || o.fromSeq < low) low = o.fromSeq;
    return low;
  }

  /**
   * Publish time of the oldest message not in memory (when memory holds nothing older). On a filtered
   * subscription, of the oldest that matches: overflowing keys begin with one (`consider`), and the unread
   * ones' is known from the count (`firstMatch`). Where it is not known (rows not counted yet; the reader
   * passed the known one and others were counted after it) the first row it could be stands in, an upper
   * bound on the age for a moment: the count is under way, or the window is being refilled (memory holds
   * older matching messages otherwise).
   */
  oldestUnreadPublishTime(): number | undefined {
    const low = this.sink.matching ? this.lowestMatchingUnread() : this.lowestUnread();
    return low === undefined ? undefined : this.store.firstPublishTimeAfter(this.source.topicUid, low - 1);
  }

  private lowestMatchingUnread(): number | undefined {
    let low = Infinity;
    for (const o of this.overflow.values()) low = Math.min(low, o.fromSeq);
    if (this.behind) {
      if (this.firstMatch !== undefined) low = Math.min(low, this.firstMatch);
      else if (this.unread > 0) low = Math.min(low, this.cursor + 1);
      if (this.countedUpTo < this.restartSeq) low = Math.min(low, Math.max(this.countedUpTo, this.cursor) + 1);
    }
    return low === Infinity ? undefined : low;
  }
}
