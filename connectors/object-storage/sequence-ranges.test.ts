import { expect, it } from 'vitest';
import { SequenceRanges } from './sequence-ranges.js';

it('holds what a set of the same sequences holds, added in any order, and gives the gaps between', () => {
  // A fixed pseudo-random order (xorshift): runs, gaps, repeats and insertions before and between ranges.
  let x = 2463534242;
  const next = () => ((x ^= x << 13), (x ^= x >>> 17), (x ^= x << 5), (x >>> 0) % 200);
  for (let round = 0; round < 50; round++) {
    const ranges = new SequenceRanges();
    const set = new Set<number>();
    for (let i = 0; i < 150; i++) {
      const seq = next();
      expect(ranges.add(seq)).toBe(!set.has(seq));
      set.add(seq);
    }
    for (let s = -1; s <= 201; s++) expect(ranges.has(s)).toBe(set.has(s));
    expect([ranges.min, ranges.max]).toEqual([Math.min(...set), Math.max(...set)]);
    const gaps = [...ranges.gaps(0, 199)].flatMap(([lo, hi]) => Array.from({ length: hi - lo + 1 }, (_, i) => lo + i));
    expect(gaps).toEqual(Array.from({ length: 200 }, (_, s) => s).filter((s) => !set.has(s)));
  }
});
