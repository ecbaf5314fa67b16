import { readdirSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { getPriority, setPriority } from 'node:os';

/**
 * The nice value given to the threads that encode Parquet files: libuv's pool (which runs DuckDB's
 * statements, the `COPY`s among them) and DuckDB's own worker threads. On two cores those threads took
 * the event loop's core for up to ~240 ms at a time; niced, the Parquet drain's longest event-loop gap
 * fell to ~50 ms (docs/benchmarks.md, § Memory, stops 48 and 49). V8's garbage-collector threads are
 * left alone: niced, their concurrent marking fell behind and the heap grew (stop 27).
 */
export const BACKGROUND_NICE = 10;

/** libuv's pool size, as libuv reads it when the pool starts. */
function poolSize(): number {
  const size = Number(process.env.UV_THREADPOOL_SIZE);
  return Number.isInteger(size) && size > 0 ? Math.min(size, 1024) : 4;
}

/** Gives up finding the pool's threads after this many rounds (each round a few reads on the pool). */
const POOL_ROUNDS = 20;

let poolLowered: Promise<number[]> | undefined;

/**
 * Lowers the priority of libuv's pool threads (Linux; elsewhere nothing, resolving to []), once per
 * process; resolves to their thread ids. They are found by themselves: a pool thread that opens
 * `/proc/thread-self/stat` opens its own, whose first field is its id (all of Node's threads are named
 * "node", so a name cannot tell them apart). A priority cannot be raised back without privileges, so
 * every later use of the pool (all of the process's `fs` calls included) runs niced too.
 */
export function lowerLibuvPoolPriority(): Promise<number[]> {
  return (poolLowered ??= findPoolThreads().then((tids) => tids.filter(lowerPriority)));
}

async function findPoolThreads(): Promise<number[]> {
  if (process.platform !== 'linux') return [];
  const wanted = poolSize();
  const found = new Set<number>();
  for (let round = 0; round < POOL_ROUNDS && found.size < wanted; round++) {
    // More reads than threads at once, so that every thread of the pool takes one.
    const stats = await Promise.all(Array.from({ length: 2 * wanted }, () => readFile('/proc/thread-self/stat', 'latin1').catch(() => '')));
    for (const stat of stats) {
      const tid = Number.parseInt(stat, 10);
      if (tid > 0 && tid !== process.pid) found.add(tid);
    }
  }
  return [...found];
}

/**
 * Runs `start` (a call that starts threads, e.g. `DuckDBInstance.create`) and lowers the priority of
 * the threads that appeared in the process while it ran (Linux; elsewhere only `start`). A thread
 * another part of the process started meanwhile would be niced too: call it where nothing else starts
 * threads (the exporter's DuckDB instances open after the store's writer thread has started).
 */
export async function withStartedThreadsLowered<T>(start: () => Promise<T>): Promise<T> {
  if (process.platform !== 'linux') return start();
  const before = new Set(threadIds());
  const result = await start();
  for (const tid of threadIds()) if (!before.has(tid)) lowerPriority(tid);
  return result;
}

function threadIds(): number[] {
  try {
    return readdirSync('/proc/self/task').map(Number);
  } catch {
    return [];
  }
}

/** True when the thread now runs at BACKGROUND_NICE or lower; false when it is gone (or not ours to change). */
function lowerPriority(tid: number): boolean {
  if (tid === process.pid) return false;
  try {
    if (getPriority(tid) < BACKGROUND_NICE) setPriority(tid, BACKGROUND_NICE);
    return true;
  } catch {
    // The thread exited between finding and niceing it: nothing to lower.
    return false;
  }
}
