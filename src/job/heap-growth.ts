import { setFlagsFromString } from 'node:v8';

/**
 * How far V8 lets the JavaScript heap grow past what survived its last full collection before it collects
 * again (`memory.heapGrowthPercent`). V8 allows up to 300% (4×) while collections are cheap; a drain or an
 * export promotes ~100 MB/s of messages that die soon after, so the heap reached 130–170 MiB, mostly
 * garbage, with about as much again in payload buffers that only that collection frees. At 60% a
 * 1M-message text export peaked at 275–287 instead of 373–386 MiB, its drain 16–24% slower (all exports).
 */
export const DEFAULT_HEAP_GROWTH_PERCENT = 60;

/** For the whole process: V8 reads it at each full collection, so it applies from the next one. */
export function limitHeapGrowth(percent: number): void {
  setFlagsFromString(`--heap-growing-percent=${percent}`);
}
