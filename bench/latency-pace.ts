import { performance } from 'node:perf_hooks';
import { KEYS, payload } from './workload.js';

/** The latency benchmark's schedule, shared by its publisher processes. */
export const RATE = Number(process.env.BENCH_LATENCY_RATE ?? 2000);
export const SECONDS = Number(process.env.BENCH_LATENCY_SECONDS ?? 20);
/**
 * Seconds at the same rate before the measured ones. Google's client spends its process's first ~2 s
 * compiling itself: at 2,000 publish calls a second its event loop was 96–100% busy for 1.75–2 s, publishes
 * queued in it for up to ~1 s, and whether that tail ended before or after a 2 s warm-up decided the p99
 * (38–81 ms or 263–658 ms in runs of the same code). The warm-up's worst latency is printed beside the percentiles.
 */
export const WARMUP_SECONDS = Number(process.env.BENCH_LATENCY_WARMUP ?? 5);
export const WARMUP = Math.round(RATE * WARMUP_SECONDS);
export const TOTAL = WARMUP + Math.round(RATE * SECONDS);

/**
 * Milliseconds on a clock every process on the machine shares (the time origin is read from the system
 * clock): a publish time taken in the publisher's process compares with a delivery time taken in another.
 */
export function clockMs(): number {
  return performance.timeOrigin + performance.now();
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Calls `send(i)` for i = 0..TOTAL-1 at RATE per second, on time (a late tick sends what is due); resolves with the rate achieved. */
export async function pace(send: (i: number) => void): Promise<number> {
  const start = performance.now();
  let i = 0;
  while (i < TOTAL) {
    const due = Math.min(TOTAL, Math.floor(((performance.now() - start) * RATE) / 1000) + 1);
    while (i < due) send(i++);
    await sleep(1);
  }
  return TOTAL / ((performance.now() - start) / 1000);
}

/** Message i of the schedule: a 1 KB payload whose JSON starts with i, on key i % KEYS. */
export function latencyMessage(i: number): { data: Buffer; orderingKey: string } {
  return { data: Buffer.from(payload(i)), orderingKey: `key-${i % KEYS}` };
}
