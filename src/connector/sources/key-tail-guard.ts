/**
 * "Never write N+1 after N failed", for a remote Pub/Sub subscription. Nacking N makes Pub/Sub deliver N
 * again and then the rest of its key, in order — but messages of the key it had already sent (held by this
 * worker, or still on the way) arrive first. Those are stale: they are nacked, not written, until the key
 * starts over. It has started over when:
 * - N comes back;
 * - a message of the key comes a second time since the nack: the second copy was sent after Pub/Sub took
 *   the nack in (it revoked the first) — so N went elsewhere (dead-lettered, or to another worker that wrote
 *   it), and this is the key's true next message;
 * - a message of the key arrives `staleWindowMs` or more after the nack (well past any copy sent before).
 * A fresh message is thus nacked at most once more than it would be (one extra delivery attempt), however
 * fast Pub/Sub redelivers — never in a loop that would run it into the dead-letter topic.
 */
export class KeyTailGuard {
  private readonly failed = new Map<string, { messageId: string; at: number; seen: Set<string> }>();

  /** @param staleWindowMs how long after a nack a message can still be a copy Pub/Sub sent before it (ack batching + round trip, with margin). */
  constructor(private readonly staleWindowMs = 2000) {}

  /**
   * Message `messageId` of `key` was nacked at `at` (ms); `held` are the key's later messages this worker
   * held (nacked with it). An earlier message failing later (files commit out of order) becomes the one
   * the key waits for.
   */
  fail(key: string, messageId: string, at: number, held: string[] = []): void {
    const seen = this.failed.get(key)?.seen ?? new Set<string>();
    for (const id of held) seen.add(id);
    this.failed.set(key, { messageId, at, seen });
  }

  /** Whether a message of `key` received at `receivedAt` (ms) may be handled; false: stale, nack it. */
  admit(key: string, messageId: string, receivedAt: number): boolean {
    const failure = this.failed.get(key);
    if (!failure) return true;
    if (messageId === failure.messageId || failure.seen.has(messageId) || receivedAt >= failure.at + this.staleWindowMs) {
      this.failed.delete(key);
      return true;
    }
    failure.seen.add(messageId);
    return false;
  }

  /** Keys waiting to start over. */
  get waiting(): number {
    return this.failed.size;
  }
}
