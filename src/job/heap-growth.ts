import { setFlagsFromString } from 'node:v8';
import type { ExportMemory } from '../connector/capabilities.js';

/**
 * How far V8 lets the JavaScript heap grow past what survived its last full collection before it collects
 * again (`memory.heapGrowthPercent`). V8 allows up to 300% (4×) while collections are cheap; a drain or an
 * export promotes ~100 MB/s of messages that die soon after, so the heap reached 130–170 MiB, mostly
 * garbage, with about as much again in payload buffers that only that collection frees. At 60% a
 * 1M-message text export peaked at 275–287 instead of 373–386 MiB, its drain 16–24% slower (all exports).
 */
export const DEFAULT_HEAP_GROWTH_PERCENT = 60;

/**
 * V8's largest (its own growth varies between 1.1× and 4× with how costly collections are), for a
 * process that only serves the endpoint: a StreamingPull consume's window messages live ~0.5 s and die,
 * and at 60% the heap was being marked almost all the time (15–17 full
 * collections a 200,000-message consume against 4–5): 17–27% less CPU per consumed message at 300, its
 * 1M-message drain peaking at ~250 instead of ~190 MiB (docs/benchmarks.md § "Endpoint vs NATS JetStream").
 */
export const SERVING_HEAP_GROWTH_PERCENT = 300;

/**
 * The heap growth a job's process runs with: the job's `memory.heapGrowthPercent` when it sets one; else
 * SERVING_HEAP_GROWTH_PERCENT in a process that runs the job (`orderly run`, `orderly serve`) until it
 * starts an export, which drops it for good to DEFAULT_HEAP_GROWTH_PERCENT or to what the export's
 * connector asks for (ExportMemory.heapGrowthPercent), if lower: an export's drain is what the limit
 * bounds; and DEFAULT_HEAP_GROWTH_PERCENT in a process that inspects (query, audit, publish, status).
 */
export class HeapGrowth {
  private current: number;

  constructor(
    private readonly setting: number | undefined,
    serving: boolean,
  ) {
    this.current = setting ?? (serving ? SERVING_HEAP_GROWTH_PERCENT : DEFAULT_HEAP_GROWTH_PERCENT);
    limitHeapGrowth(this.current);
  }

  /** The percentage in effect. */
  get percent(): number {
    return this.current;
  }

  /** An export started in this process, whose connector declares `memory` (ExportManagerOptions.onRunnerStart). */
  exporting(memory: ExportMemory = {}): void {
    const percent = Math.min(DEFAULT_HEAP_GROWTH_PERCENT, memory.heapGrowthPercent ?? DEFAULT_HEAP_GROWTH_PERCENT);
    if (this.setting !== undefined || this.current <= percent) return;
    this.current = percent;
    limitHeapGrowth(this.current);
  }
}

/** For the whole process: V8 reads it at each full collection, so it applies from the next one. */
export function limitHeapGrowth(percent: number): void {
  setFlagsFromString(`--heap-growing-percent=${percent}`);
}
