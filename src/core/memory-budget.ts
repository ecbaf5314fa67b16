import type { SubscriptionSpec } from './subscription-config.js';

/** What the core keeps in memory; everything beyond stays in the store and is read back as needed. */
export interface MemoryOptions {
  /**
   * Payload bytes all subscriptions of the core keep in memory together (default 64 MiB). Beyond it a
   * message's payload stays in the store and is read back when the message is delivered.
   */
  payloadBytes?: number;
  /**
   * Messages one subscription keeps in memory, delivered or waiting (default 20,000). The rest of its
   * backlog is read from the store, oldest first, as these are acked.
   */
  messagesPerSubscription?: number;
  /**
   * Messages of one ordering key kept in memory (default 1,000), so a key that is blocked (a failing
   * message in backoff, a slow consumer) cannot fill the subscription's window and hold up other keys.
   */
  messagesPerKey?: number;
  /**
   * A subscription's own smaller window, from its settings, in force from the moment the store is opened
   * or the subscription created (an export whose connector reads less ahead: ExportMemory.windowMessages).
   * A consumer asking for fewer still lowers it while attached; undefined: `messagesPerSubscription`.
   */
  windowOf?: (spec: SubscriptionSpec) => number | undefined;
}

export const DEFAULT_MEMORY = { payloadBytes: 64 * 1024 * 1024, messagesPerSubscription: 20_000, messagesPerKey: 1_000 } as const;

/** The payload bytes the subscriptions of one core share (MemoryOptions.payloadBytes). */
export class PayloadBudget {
  private used = 0;

  constructor(readonly limit: number) {}

  /** Reserves `bytes` if they fit; false leaves the payload in the store. */
  take(bytes: number): boolean {
    if (this.used + bytes > this.limit) return false;
    this.used += bytes;
    return true;
  }

  give(bytes: number): void {
    this.used -= bytes;
  }

  get room(): number {
    return Math.max(0, this.limit - this.used);
  }

  get inUse(): number {
    return this.used;
  }
}
