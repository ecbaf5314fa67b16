import { DuckDBInstance } from '@duckdb/node-api';
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { BACKGROUND_NICE, lowerLibuvPoolPriority, withStartedThreadsLowered } from '../../src/duckdb/background-priority.js';

/** A thread's nice value as the kernel reports it (the 19th field of its stat, counted after the name). */
function niceOf(tid: number): number {
  const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'latin1');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
}

const threads = () => readdirSync('/proc/self/task').map(Number);

// Each test file runs in a process of its own (vitest's forks pool): the threads niced here are this file's.
describe.runIf(process.platform === 'linux')('background thread priority', () => {
  it("nices every thread of libuv's pool, and not the event loop's", async () => {
    const pool = await lowerLibuvPoolPriority();
    expect(pool).toHaveLength(Number(process.env.UV_THREADPOOL_SIZE ?? 4));
    expect(pool).not.toContain(process.pid);
    for (const tid of pool) {
      expect(threads()).toContain(tid);
      expect(niceOf(tid)).toBe(BACKGROUND_NICE);
    }
    expect(niceOf(process.pid)).toBe(0);
    // Once per process: the same threads again.
    expect(await lowerLibuvPoolPriority()).toEqual(pool);
  });

  it("nices the worker threads a DuckDB instance starts, and leaves the process's other threads as they were", async () => {
    const before = threads();
    const niceBefore = new Map(before.map((tid) => [tid, niceOf(tid)]));
    const instance = await withStartedThreadsLowered(() => DuckDBInstance.create(':memory:', { threads: '3' }));
    try {
      const started = threads().filter((tid) => !niceBefore.has(tid));
      // threads = 3: the calling thread and two workers of DuckDB's own.
      expect(started.length).toBeGreaterThanOrEqual(2);
      for (const tid of started) expect(niceOf(tid)).toBe(BACKGROUND_NICE);
      for (const tid of before) if (threads().includes(tid)) expect(niceOf(tid)).toBe(niceBefore.get(tid));
      // The niced workers still do DuckDB's work.
      const connection = await instance.connect();
      const rows = (await connection.runAndReadAll('SELECT count(*) AS n FROM range(1000000)')).getRowObjects();
      expect(Number(rows[0]!.n)).toBe(1_000_000);
      connection.closeSync();
    } finally {
      instance.closeSync();
    }
  });
});
