/**
 * Time source for everything with a deadline (leases, backoff, retention). Injected so tests can move
 * time forward deterministically instead of sleeping.
 */
export interface Clock {
  now(): number;
  setInterval(fn: () => void, ms: number): { cancel(): void };
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setInterval(fn, ms) {
    const handle = setInterval(fn, ms);
    handle.unref();
    return { cancel: () => clearInterval(handle) };
  },
};

/** A clock that only moves when told to; `advance` fires the intervals that fall due, in time order. */
export class ManualClock implements Clock {
  private timers = new Set<{ fn: () => void; every: number; due: number }>();

  constructor(private current = Date.UTC(2026, 0, 1)) {}

  now(): number {
    return this.current;
  }

  setInterval(fn: () => void, ms: number): { cancel(): void } {
    const timer = { fn, every: Math.max(1, ms), due: this.current + Math.max(1, ms) };
    this.timers.add(timer);
    return { cancel: () => this.timers.delete(timer) };
  }

  advance(ms: number): void {
    const target = this.current + ms;
    for (;;) {
      let next: { fn: () => void; every: number; due: number } | undefined;
      for (const t of this.timers) if (t.due <= target && (!next || t.due < next.due)) next = t;
      if (!next) break;
      this.current = next.due;
      next.due += next.every;
      next.fn();
    }
    this.current = target;
  }
}
