import { SLICE_MS } from '../core/loop-slice.js';

/**
 * Cuts a long synchronous loop (mapping and appending thousands of rows) into slices of about `sliceMs`,
 * giving the event loop back between them: timers, acks, status requests and other subscriptions'
 * deliveries would otherwise wait for the whole batch (hundreds of ms for 5,000 1 KB rows). SLICE_MS by
 * default: one turn of the event loop runs a slice of each busy part (the core's backlog read, dispatch and
 * publishes, the connector's write, the runner's acks) plus a garbage collection; at 10 ms slices a turn
 * reached 50–70 ms at a 1M-message drain.
 */
export class LoopSlicer {
  private sliceStart = performance.now();

  constructor(private readonly sliceMs = SLICE_MS) {}

  /** True once the current slice has run its time: the caller finishes its step, then awaits `yield()`. */
  get due(): boolean {
    return performance.now() - this.sliceStart >= this.sliceMs;
  }

  /** Lets the event loop run (a macrotask, so I/O and timers too), then starts a new slice. */
  async yield(): Promise<void> {
    await new Promise<void>((resolve) => setImmediate(resolve));
    this.sliceStart = performance.now();
  }
}
