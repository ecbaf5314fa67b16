/**
 * A seek back on a remote subscription, as a worker sees it: a remote endpoint tells no subscriber of a
 * seek. On an ordered subscription Pub/Sub delivers a key in publish order, so a message of a key published
 * before one this worker holds can only be a replay (a seek back, to a time or a snapshot, done elsewhere).
 * Written after the held ones, it would put the key out of order inside the open file. Kept per key: the
 * latest publish time among the messages held. It is not lowered as they go (that would take a scan per
 * ack): a stale one only makes the source look at the key's held messages, and settle it, once more.
 */
export class ReplayDetector {
  private readonly keys = new Map<string, { latest: number; held: number }>();

  /** A message of `key` published at `at` (ms) is held. */
  hold(key: string, at: number): void {
    const k = this.keys.get(key);
    if (!k) this.keys.set(key, { latest: at, held: 1 });
    else {
      k.held++;
      if (at > k.latest) k.latest = at;
    }
  }

  /** A held message of `key` was acked or nacked. */
  release(key: string): void {
    const k = this.keys.get(key);
    if (k && --k.held === 0) this.keys.delete(key);
  }

  /** Whether a message of `key` published at `at` (ms) may be a replay: one held of its key was published later. */
  mayReplay(key: string, at: number): boolean {
    const k = this.keys.get(key);
    return k !== undefined && at < k.latest;
  }

  /** The key's held messages were looked at: `latest` is the latest publish time among them. */
  settle(key: string, latest: number): void {
    const k = this.keys.get(key);
    if (k) k.latest = latest;
  }

  clear(): void {
    this.keys.clear();
  }
}
