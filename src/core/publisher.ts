import { OrderingKeyPausedError } from './errors.js';
import { LIMITS } from './limits.js';
import { inputSize, type MessageInput } from './message.js';
import type { PubSubCore } from './pubsub-core.js';

interface Pending {
  message: MessageInput;
  resolve: (id: string) => void;
  reject: (e: unknown) => void;
}

/**
 * Publisher-side ordering, as the client libraries do it: a key's messages go out one batch at a time,
 * in call order (what arrives while a batch is in flight forms the next batch). When a publish fails,
 * the key pauses: its queued and later publishes fail with `OrderingKeyPausedError` until
 * `resumePublishing(key)`. Otherwise a retry could land message 2 before message 1.
 *
 * Publishes queued behind a key's batch in flight are sent after it: `await publisher.flush()` before
 * closing the core, or the core refuses them as closed.
 */
export class Publisher {
  private readonly paused = new Set<string>();
  private readonly queues = new Map<string, Pending[]>();
  /** Publishes and key drains not settled yet; each removes itself when it settles, and never rejects. */
  private readonly inFlight = new Set<Promise<void>>();

  constructor(
    private readonly core: PubSubCore,
    readonly topic: string,
  ) {}

  publish(message: MessageInput): Promise<string> {
    // A caller without types may pass no object or a key that is no string: the core refuses those, naming the field.
    const key: unknown = (message as MessageInput | null)?.orderingKey ?? '';
    if (typeof key !== 'string' || key === '') {
      const published = this.core.publish(this.topic, [message]).then((ids) => ids[0]!);
      this.track(published.then(ignore, ignore));
      return published;
    }
    if (this.paused.has(key)) return Promise.reject(new OrderingKeyPausedError(key));
    return new Promise((resolve, reject) => {
      const queue = this.queues.get(key);
      if (queue) return void queue.push({ message, resolve, reject });
      this.queues.set(key, [{ message, resolve, reject }]);
      // drain settles every pending publish itself; if it failed anyway, what is still queued fails with it.
      this.track(
        this.drain(key).catch((e: unknown) => {
          for (const p of this.queues.get(key) ?? []) p.reject(e);
          this.queues.delete(key);
        }),
      );
    });
  }

  /**
   * Resolves once every publish called before it has settled (published or failed: each publish's own
   * promise says which), those queued behind a batch in flight included. Never rejects.
   */
  async flush(): Promise<void> {
    await Promise.all([...this.inFlight]);
  }

  private track(settled: Promise<void>): void {
    this.inFlight.add(settled);
    void settled.then(() => this.inFlight.delete(settled));
  }

  private async drain(key: string): Promise<void> {
    const queue = this.queues.get(key)!;
    while (queue.length) {
      const batch = takeBatch(queue);
      if (this.paused.has(key)) {
        for (const p of batch) p.reject(new OrderingKeyPausedError(key));
        continue;
      }
      try {
        const ids = await this.core.publish(
          this.topic,
          batch.map((p) => p.message),
        );
        batch.forEach((p, i) => p.resolve(ids[i]!));
      } catch (e) {
        this.paused.add(key);
        for (const p of batch) p.reject(e);
      }
    }
    this.queues.delete(key);
  }

  isPaused(orderingKey: string): boolean {
    return this.paused.has(orderingKey);
  }

  resumePublishing(orderingKey: string): void {
    this.paused.delete(orderingKey);
  }
}

function ignore(): void {}

/**
 * Up to 1000 messages, and about 9 MiB so the request stays under Pub/Sub's 10 MiB limit, counted as the
 * limit counts them (data, ordering key and attributes: validateBatch): counting data alone, a batch of
 * messages with large attributes went over and failed whole, pausing its key.
 */
function takeBatch(queue: Pending[]): Pending[] {
  let bytes = 0;
  let n = 0;
  while (n < queue.length && n < LIMITS.maxBatchMessages) {
    bytes += inputSize(queue[n]!.message);
    if (n > 0 && bytes > 9 * 1024 * 1024) break;
    n++;
  }
  return queue.splice(0, n);
}
