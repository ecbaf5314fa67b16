import type { PubsubMessage } from '../core/message.js';

/**
 * "Defer the rest of a key after a failure", for one write: once a message of an ordering key failed,
 * the key's later messages in the batch are not written (a writer reports them `deferred`; they come
 * again after the failed one), so a key never has N+1 written after N failed. Only where the
 * subscription delivers keys in order; messages without a key never hold each other up.
 */
export class FailedKeys {
  private readonly failed = new Set<string>();

  constructor(private readonly ordered: boolean) {}

  /** Whether an earlier message of `m`'s key failed in this write. */
  blocks(m: PubsubMessage): boolean {
    return this.failed.has(m.orderingKey) && this.applies(m);
  }

  /** `m` failed: its key's later messages wait. */
  fail(m: PubsubMessage): void {
    if (this.applies(m)) this.failed.add(m.orderingKey);
  }

  private applies(m: PubsubMessage): boolean {
    return this.ordered && m.orderingKey !== '';
  }
}
