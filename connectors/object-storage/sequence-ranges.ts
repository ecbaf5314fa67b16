/**
 * A set of sequence numbers kept as sorted, disjoint, non-adjacent ranges: what an audit knows of a key
 * costs two numbers per run of consecutive sequences, not one per sequence (an export in order is one run
 * however long its history). Adding at the end, the common case, is O(1).
 */
export class SequenceRanges {
  /** lo0, hi0, lo1, hi1, ... (an array grown by push from empty takes room for 17 numbers: most sets are one range) */
  private bounds: number[] = [];

  /** Adds `seq`; false if it was held already. */
  add(seq: number): boolean {
    const b = this.bounds;
    const n = b.length;
    if (n && seq === b[n - 1]! + 1) {
      b[n - 1] = seq;
      return true;
    }
    if (!n) {
      this.bounds = [seq, seq];
      return true;
    }
    if (seq > b[n - 1]! + 1) {
      b.push(seq, seq);
      return true;
    }
    const i = this.rangeFrom(seq);
    if (i < n && b[i]! <= seq) return false;
    // seq lies before range i (or after the last one): join the ranges it touches.
    const joinsBefore = i > 0 && b[i - 1]! === seq - 1;
    const joinsAfter = i < n && b[i]! === seq + 1;
    if (joinsBefore && joinsAfter) b.splice(i - 1, 2);
    else if (joinsBefore) b[i - 1] = seq;
    else if (joinsAfter) b[i] = seq;
    else b.splice(i, 0, seq, seq);
    return true;
  }

  has(seq: number): boolean {
    const i = this.rangeFrom(seq);
    return i < this.bounds.length && this.bounds[i]! <= seq;
  }

  /** The index of the first range whose end is at or above `seq` (bounds.length if none). */
  private rangeFrom(seq: number): number {
    let lo = 0;
    let hi = this.bounds.length / 2;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.bounds[2 * mid + 1]! < seq) lo = mid + 1;
      else hi = mid;
    }
    return 2 * lo;
  }

  get min(): number | undefined {
    return this.bounds[0];
  }

  get max(): number | undefined {
    return this.bounds[this.bounds.length - 1];
  }

  /** The ranges of sequences between `from` and `to` (inclusive) that the set does not hold, in order. */
  *gaps(from: number, to: number): Generator<[lo: number, hi: number]> {
    let next = from;
    for (let i = 0; i < this.bounds.length && next <= to; i += 2) {
      const [lo, hi] = [this.bounds[i]!, this.bounds[i + 1]!];
      if (hi < next) continue;
      if (lo > next) yield [next, Math.min(lo - 1, to)];
      next = hi + 1;
    }
    if (next <= to) yield [next, to];
  }
}
