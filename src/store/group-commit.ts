/**
 * Collects the writes issued during one turn of the event loop and runs them in a single transaction,
 * so many publishes and acks share one sync. Each caller's promise settles when that transaction has
 * committed (or failed).
 */
export class GroupCommit {
  private pending: { op: () => void; resolve: () => void; reject: (e: unknown) => void }[] = [];
  private scheduled = false;

  constructor(private readonly runInTransaction: (ops: (() => void)[]) => void) {}

  submit(op: () => void): Promise<void> {
    return new Promise((resolve, reject) => {
      this.pending.push({ op, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  /** Runs whatever is queued now; used by close() so nothing accepted is dropped. */
  flush(): void {
    this.scheduled = false;
    const batch = this.pending;
    if (batch.length === 0) return;
    this.pending = [];
    try {
      this.runInTransaction(batch.map((b) => b.op));
    } catch (e) {
      for (const b of batch) b.reject(e);
      return;
    }
    for (const b of batch) b.resolve();
  }
}
