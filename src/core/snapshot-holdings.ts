import type { SnapshotRecord, Store } from '../store/store.js';

/** What a snapshot keeps in the store: its topic's messages above its lowSeq, whoever else still needs them. */
export interface SnapshotHolding {
  messages: number;
  /** Their payload bytes. */
  bytes: number;
  /** False while its first count is under way: then `messages` and `bytes` are what was counted so far. */
  counted: boolean;
}

interface Tally {
  /** Counted: the topic's messages with lowSeq < seq <= through. */
  through: number;
  messages: number;
  bytes: number;
  /** Its first count has reached the newest message (then every later read brings it up to date). */
  counted: boolean;
}

/** Messages read per store query. */
const CHUNK = 10_000;

/**
 * Counts what each live snapshot keeps, a range at a time. What was counted stays counted: a live
 * snapshot's messages are never deleted (compaction keeps them), so each read reads only what was
 * published since the last one. A snapshot's first count (its whole range: 0.34 s for 200,000 1 KB
 * messages) is spread over reads by their budget, so a scrape never blocks the event loop for a whole store.
 */
export class SnapshotHoldings {
  /** By snapshot uid. */
  private readonly tallies = new Map<number, Tally>();

  constructor(private readonly store: Pick<Store, 'messageTotals'>) {}

  /**
   * The holdings of `snapshots` (by uid), counted up to `upToSeq` (every message at or below it committed),
   * reading at most `budget` messages (Infinity: to the end, for a one-off report): first what was
   * published since into snapshots counted whole before (their figures trail by what the budget left
   * for the next read), then the others' first counts. Unbounded, the catching up was one step as long as
   * the publishes between two reads: a second for a million.
   */
  read(snapshots: SnapshotRecord[], upToSeq: number, budget: number): Map<number, SnapshotHolding> {
    const live = new Set(snapshots.map((s) => s.uid));
    for (const uid of this.tallies.keys()) if (!live.has(uid)) this.tallies.delete(uid);
    const tallyOf = (s: SnapshotRecord) => {
      let tally = this.tallies.get(s.uid);
      if (!tally) this.tallies.set(s.uid, (tally = { through: s.lowSeq, messages: 0, bytes: 0, counted: false }));
      return tally;
    };
    const tallied = snapshots.map((s) => [s, tallyOf(s)] as const);
    let left = budget;
    for (const [s, tally] of [...tallied.filter(([, t]) => t.counted), ...tallied.filter(([, t]) => !t.counted)]) {
      left -= this.advance(s, tally, upToSeq, left);
      tally.counted ||= tally.through >= upToSeq;
    }
    return new Map(tallied.map(([s, { messages, bytes, counted }]) => [s.uid, { messages, bytes, counted }]));
  }

  /** Counts on from `tally.through` towards `upToSeq`, reading at most `budget` messages; returns how many it read. */
  private advance(s: SnapshotRecord, tally: Tally, upToSeq: number, budget: number): number {
    let read = 0;
    while (tally.through < upToSeq && read < budget) {
      const limit = Math.min(CHUNK, budget - read);
      const got = this.store.messageTotals(s.topicUid, tally.through, upToSeq, limit);
      tally.messages += got.messages;
      tally.bytes += got.bytes;
      read += got.messages;
      tally.through = got.messages < limit ? upToSeq : got.lastSeq;
    }
    return read;
  }
}
