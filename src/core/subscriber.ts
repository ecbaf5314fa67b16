import { messageSize, type ReceivedMessage } from './message.js';
import type { PubSubCore } from './pubsub-core.js';
import type { Consumer, SubscriptionRuntime } from './subscription-runtime.js';

export interface SubscribeOptions {
  /** Most messages / bytes handed to this subscriber and not yet settled (defaults 1000 / 100 MiB, as the Node client). */
  flowControl?: { maxMessages?: number; maxBytes?: number };
  /** Leases of running handlers are extended for at most this long (default 3600 s, as the Node client). */
  maxExtensionSeconds?: number;
  /** Subscribers with the same affinity name count as one client for key affinity (default: each its own). */
  affinity?: string;
  /** Told about handler failures (the message is nacked either way). */
  onError?: (error: unknown, message: ReceivedMessage) => void;
}

export interface DeliveredMessage extends ReceivedMessage {
  ack(): void;
  nack(): void;
}

/**
 * Handles one message. Returning settles it: acked, unless `nack()` was called; throwing nacks it.
 * On an ordered subscription the next message of the same key is handed over only after this one settled.
 */
export type MessageHandler = (message: DeliveredMessage) => void | Promise<void>;

/**
 * Callback delivery, like the client libraries' streaming pull: flow control, per-key serial handlers,
 * lease extension while a handler runs. Ordering comes from the core (one outstanding batch per key);
 * the per-key chain here keeps a batch's messages and any redelivery of the key in order locally.
 */
export class Subscriber {
  readonly id = `subscriber-${Math.random().toString(36).slice(2, 10)}`;
  private outstandingMessages = 0;
  private outstandingBytes = 0;
  private readonly chains = new Map<string, Promise<void>>();
  private readonly running = new Set<Promise<unknown>>();
  private readonly received = new Map<string, number>();
  private readonly timer: { cancel(): void };
  private readonly maxMessages: number;
  private readonly maxBytes: number;
  private readonly ordered: boolean;
  private readonly subscription: string;
  private readonly ackDeadlineSeconds: number;
  private closing = false;

  constructor(
    private readonly core: PubSubCore,
    runtime: SubscriptionRuntime,
    private readonly handler: MessageHandler,
    private readonly options: SubscribeOptions,
  ) {
    this.subscription = runtime.name;
    this.ordered = runtime.spec.enableMessageOrdering;
    this.ackDeadlineSeconds = runtime.spec.ackDeadlineSeconds;
    this.maxMessages = options.flowControl?.maxMessages ?? 1000;
    this.maxBytes = options.flowControl?.maxBytes ?? 100 * 1024 * 1024;
    const consumer: Consumer = {
      id: this.id,
      affinity: options.affinity ?? this.id,
      maxPerKey: Number.MAX_SAFE_INTEGER,
      room: () => ({
        messages: this.closing ? 0 : this.maxMessages - this.outstandingMessages,
        bytes: this.maxBytes - this.outstandingBytes,
      }),
      deliver: (batch) => this.receive(batch),
    };
    runtime.addConsumer(consumer);
    // Extend at half the deadline so a slow handler never loses its lease (the Node client does likewise).
    this.timer = core.clock.setInterval(() => this.extendLeases(), (this.ackDeadlineSeconds * 1000) / 2);
  }

  get outstanding(): number {
    return this.outstandingMessages;
  }

  private receive(batch: ReceivedMessage[]): void {
    const now = this.core.clock.now();
    for (const m of batch) {
      this.outstandingMessages++;
      this.outstandingBytes += messageSize(m.message);
      this.received.set(m.ackId, now);
      const key = m.message.orderingKey;
      if (this.ordered && key !== '') {
        const next = (this.chains.get(key) ?? Promise.resolve()).then(() => this.run(m));
        this.chains.set(key, next);
        const forget = () => {
          if (this.chains.get(key) === next) this.chains.delete(key);
        };
        next.then(forget, forget);
        this.track(next);
      } else {
        this.track(this.run(m));
      }
    }
  }

  private track(p: Promise<unknown>): void {
    this.running.add(p);
    const done = () => this.running.delete(p);
    p.then(done, done);
  }

  private async run(m: ReceivedMessage): Promise<void> {
    try {
      // A nack or expiry of an earlier message of the key revoked this delivery: it will come again.
      if (!this.isLive(m.ackId)) return;
      if (this.closing) return this.settle(m, 0);
      let settled = false;
      const delivered: DeliveredMessage = {
        ...m,
        ack: () => {
          if (!settled) this.settle(m, 1);
          settled = true;
        },
        nack: () => {
          if (!settled) this.settle(m, 0);
          settled = true;
        },
      };
      try {
        await this.handler(delivered);
        delivered.ack();
      } catch (e) {
        delivered.nack();
        this.report(e, m);
      }
    } finally {
      this.outstandingMessages--;
      this.outstandingBytes -= messageSize(m.message);
      this.received.delete(m.ackId);
      this.schedule();
    }
  }

  /** 1 = ack, 0 = nack. */
  private settle(m: ReceivedMessage, ack: 0 | 1): void {
    const done = ack
      ? this.core.acknowledge(this.subscription, [m.ackId])
      : this.core.modifyAckDeadline(this.subscription, [m.ackId], 0);
    this.track(done.catch((e: unknown) => this.report(e, m)));
  }

  /**
   * Tells `onError`. A hook that throws must not break this key's chain (its later messages would never
   * run): its error is rethrown on its own, where the process's handlers see it.
   */
  private report(error: unknown, m: ReceivedMessage): void {
    try {
      this.options.onError?.(error, m);
    } catch (hookError) {
      queueMicrotask(() => {
        throw hookError;
      });
    }
  }

  private isLive(ackId: string): boolean {
    return this.core.hasSubscription(this.subscription) && this.core.runtime(this.subscription).isLive(ackId);
  }

  private schedule(): void {
    if (this.core.hasSubscription(this.subscription)) this.core.runtime(this.subscription).scheduleDispatch();
  }

  private extendLeases(): void {
    const now = this.core.clock.now();
    const limit = (this.options.maxExtensionSeconds ?? 3600) * 1000;
    const ids = [...this.received].filter(([, at]) => now - at < limit).map(([id]) => id);
    if (ids.length && this.core.hasSubscription(this.subscription)) {
      void this.core.modifyAckDeadline(this.subscription, ids, this.ackDeadlineSeconds).catch(() => undefined);
    }
  }

  /** Stops taking messages, lets running handlers finish (not-yet-started ones are nacked), then detaches. */
  async close(): Promise<void> {
    this.closing = true;
    while (this.running.size) await Promise.allSettled([...this.running]);
    this.timer.cancel();
    if (this.core.hasSubscription(this.subscription)) this.core.runtime(this.subscription).removeConsumer(this.id);
  }
}
