/**
 * "Never write N+1 after N failed", for a remote Pub/Sub subscription. Nacking N makes Pub/Sub deliver N
 * again and then the rest of its key, in order — but messages of the key it had already sent (held by this
 * worker, or still on the way) arrive first. Those are stale: they must be nacked, not written, until the
 * key starts over. It starts over when N comes back; or when a message of the key arrives that Pub/Sub
 * sent after it took the nack in (received `staleWindowMs` or more after the nack): then N went elsewhere
 * (dead-lettered, or to another worker that wrote it), and what follows is the key's true next message.
 */
export class KeyTailGuard {
  private readonly failed = new Map<string, { messageId: string; at: number }>();

  /** @param staleWindowMs how long after a nack a message can still be one Pub/Sub sent before it (ack batching + round trip, with margin). */
  constructor(private readonly staleWindowMs = 2000) {}

  /** Message `messageId` of `key` was nacked at `at` (ms). */
  fail(key: string, messageId: string, at: number): void {
    if (!this.failed.has(key)) this.failed.set(key, { messageId, at });
  }

  /** Whether a message of `key` received at `receivedAt` (ms) may be handled; false: stale, nack it. */
  admit(key: string, messageId: string, receivedAt: number): boolean {
    const failure = this.failed.get(key);
    if (!failure) return true;
    if (messageId !== failure.messageId && receivedAt < failure.at + this.staleWindowMs) return false;
    this.failed.delete(key);
    return true;
  }

  /** Keys waiting to start over. */
  get waiting(): number {
    return this.failed.size;
  }
}
