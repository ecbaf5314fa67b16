import { SLICE_MS } from './loop-slice.js';

/**
 * Runs the synchronous part of publishes (validation, sequence allocation, handing the batch to the store's
 * writer) on macrotasks, in call order, about `sliceMs` at a time. A caller that issues several
 * 1,000-message publishes in one turn would otherwise hold the event loop for all of them together
 * (60–90 ms on a cold start at four in flight), and timers, acks and deliveries with it.
 */
export class PublishQueue {
  private tasks: (() => void)[] = [];
  private head = 0;
  private scheduled = false;

  constructor(private readonly sliceMs = SLICE_MS) {}

  /** Queues `work`; it runs after every publish queued before it, and its result is the returned promise's. */
  run<T>(work: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.tasks.push(() => {
        work().then(resolve, reject);
      });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.slice());
      }
    });
  }

  /** Runs everything queued, now: before a flush or a close, which must cover every publish already called. */
  drain(): void {
    while (this.head < this.tasks.length) this.next();
  }

  private slice(): void {
    this.scheduled = false;
    const start = performance.now();
    while (this.head < this.tasks.length) {
      this.next();
      if (this.head < this.tasks.length && performance.now() - start >= this.sliceMs) {
        this.scheduled = true;
        setImmediate(() => this.slice());
        return;
      }
    }
  }

  private next(): void {
    const task = this.tasks[this.head++]!;
    if (this.head === this.tasks.length) {
      this.tasks = [];
      this.head = 0;
    }
    task();
  }
}
