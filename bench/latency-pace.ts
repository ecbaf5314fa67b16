import { performance } from 'node:perf_hooks';
import { KEYS, payload } from './workload.js';

/** The latency benchmark's schedule, shared by its publisher processes. */
export const RATE = Number(process.env.BENCH_LATENCY_RATE ?? 2000);
export const SECONDS = Number(process.env.BENCH_LATENCY_SECONDS ?? 20);
export const WARMUP = Math.round(RATE * 2);
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
