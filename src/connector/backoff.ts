/** Exponential backoff with jitter, for reconnecting to a sink: 1 s, 2 s, 4 s … capped (default 60 s). */
export class Backoff {
  private attempt = 0;

  constructor(
    private readonly minMs = 1000,
    private readonly maxMs = 60_000,
  ) {}

  next(): number {
    const base = Math.min(this.maxMs, this.minMs * 2 ** Math.min(this.attempt++, 30));
    return Math.round(base * (0.8 + Math.random() * 0.4));
  }

  reset(): void {
    this.attempt = 0;
  }
}
