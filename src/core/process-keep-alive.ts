/**
 * Keeps the process running until the returned function is called: signal listeners and unref'd handles do
 * not. A ref'd timer that never fires is the cheapest handle that keeps the event loop alive.
 */
export function holdProcess(): () => void {
  const timer = setInterval(() => undefined, 2 ** 31 - 1);
  return () => clearInterval(timer);
}

/**
 * Keeps the process running while a callback subscriber is open, as an open StreamingPull stream does for
 * Google's client: everything else the core runs on (its ticks, the store's writer thread) is unref'd, so
 * that a script which only publishes ends when it is done, and a script which only subscribes ended at once,
 * before a single message arrived.
 */
export class ProcessKeepAlive {
  private readonly holders = new Set<object>();
  private releaseProcess?: () => void;

  /** Holds the process until the returned release (idempotent) or `releaseAll`. */
  hold(): () => void {
    const holder = {};
    this.holders.add(holder);
    this.releaseProcess ??= holdProcess();
    return () => {
      this.holders.delete(holder);
      if (this.holders.size === 0) this.releaseAll();
    };
  }

  releaseAll(): void {
    this.holders.clear();
    this.releaseProcess?.();
    this.releaseProcess = undefined;
  }
}
