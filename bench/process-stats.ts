import { readFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';

/**
 * This process's peak resident set (VmHWM) in bytes: the kernel's high-water mark over the process's whole
 * life, native memory (SQLite, DuckDB, thread stacks) included, so nothing between two samples is missed.
 */
export function peakRssBytes(): number {
  const match = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync('/proc/self/status', 'utf8'));
  if (!match) throw new Error('no VmHWM in /proc/self/status (the memory benchmarks need Linux)');
  return Number(match[1]) * 1024;
}

/**
 * Watches the event loop: a timer every 1 ms records how late it ran (perf_hooks.monitorEventLoopDelay),
 * so the max bounds the longest the loop was blocked while this ran (a synchronous step, or microtasks that
 * never yield). `stop()` resolves with that max in ms.
 *
 * Node records the whole gap between two runs of its timer, so the max is the longest block plus up to one
 * timer period: with a 10 ms timer a 40 ms busy loop read 41.5-49.4 ms depending on
 * where in the period it started; with 1 ms, 41.2-41.4 ms. The finest period Node takes keeps the figure an
 * upper bound on the blocking, as close to it as the monitor can measure.
 */
export async function watchEventLoop(): Promise<{ stop(): Promise<number> }> {
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  histogram.enable();
  // The timer's first run only starts the clock (a delay is measured from one run to the next): until it
  // has run, a block would go unrecorded.
  await new Promise((resolve) => setTimeout(resolve, 25));
  return {
    async stop() {
      // One more turn of the loop first: a block that just ended is recorded when the timer next runs.
      await new Promise((resolve) => setTimeout(resolve, 20));
      histogram.disable();
      // As Node reports it: the longest gap between two runs of the timer (an idle loop reads ~1 ms, a 100 ms
      // block 100-101 ms).
      return histogram.max / 1e6;
    },
  };
}
