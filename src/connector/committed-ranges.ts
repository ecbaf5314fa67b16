/**
 * Per ordering key, the sequence ranges that committed objects hold. "Already written" asks whether a
 * sequence lies inside one — never whether it is below the highest committed sequence: an earlier file
 * can fail after a later file of the same key committed, and its messages, coming again, are below that
 * high-water mark without being written anywhere.
 */
export class CommittedRanges {
  /** Per key: disjoint, non-adjacent [first, last] ranges in increasing order. */
  private readonly ranges = new Map<string, [number, number][]>();

  add(key: string, first: number, last: number): void {
    const list = this.ranges.get(key) ?? [];
    this.ranges.set(key, list);
    const i = firstEndingAtOrAfter(list, first - 1);
    let j = i;
    let lo = first;
    let hi = last;
    // Ranges that overlap or touch [first, last] merge with it.
    while (j < list.length && list[j]![0] <= last + 1) {
      lo = Math.min(lo, list[j]![0]);
      hi = Math.max(hi, list[j]![1]);
      j++;
    }
    list.splice(i, j - i, [lo, hi]);
  }

  /** The key's highest range. */
  last(key: string): readonly [number, number] | undefined {
    return this.ranges.get(key)?.at(-1);
  }

  /** How many keys hold ranges. */
  get keys(): number {
    return this.ranges.size;
  }

  *entries(): Generator<[key: string, first: number, last: number]> {
    for (const [key, list] of this.ranges) for (const [first, last] of list) yield [key, first, last];
  }

  has(key: string, sequence: number): boolean {
    const list = this.ranges.get(key);
    if (!list) return false;
    const range = list[firstEndingAtOrAfter(list, sequence)];
    return range !== undefined && range[0] <= sequence;
  }
}

function firstEndingAtOrAfter(list: [number, number][], value: number): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (list[mid]![1] >= value) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}
