import type { ConsumerSpec, SubscriptionHandle } from './consumer.js';
import { InvalidArgumentError } from './errors.js';
import { messageSize, type ReceivedMessage } from './message.js';

export interface SubscribeOptions {
  /** Most messages / bytes handed to this subscriber and not yet settled (defaults 1000 / 100 MiB, as the Node client). */
  flowControl?: { maxMessages?: number; maxBytes?: number };
  /** Leases of running handlers are kept alive for at most this long (default 3600 s, as the Node client). */
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
 * Callback delivery, like the client libraries' streaming pull: flow control, per-key serial handlers;
 * the core keeps the leases of messages being handled alive (up to maxExtensionSeconds). Ordering comes
 * from the core (one outstanding batch per key); the per-key chain here keeps a batch's messages and any
 * redelivery of the key in order locally.
 */
export class Subscriber {
  private outstandingMessages = 0;
  private outstandingBytes = 0;
  private readonly chains = new Map<string, Promise<void>>();
  private readonly running = new Set<Promise<unknown>>();
  /** Messages whose handler acked them, sent to the core together once the current microtasks ran. */
  private acks: ReceivedMessage[] = [];
  private readonly maxMessages: number;
  private readonly maxBytes: number;
  private readonly handle: SubscriptionHandle;
  private closing = false;

  constructor(
    attach: (consumer: ConsumerSpec) => SubscriptionHandle,
    private readonly handler: MessageHandler,
    private readonly options: SubscribeOptions,
    /** Lets the process end (the core holds it while this subscriber is open). */
    private readonly release: () => void,
  ) {
    this.maxMessages = positive('flowControl.maxMessages', options.flowControl?.maxMessages ?? 1000);
    this.maxBytes = positive('flowControl.maxBytes', options.flowControl?.maxBytes ?? 100 * 1024 * 1024);
    this.handle = attach({
      affinity: options.affinity,
      keepAliveSeconds: options.maxExtensionSeconds ?? 3600,
      room: () => ({
        messages: this.closing ? 0 : this.maxMessages - this.outstandingMessages,
        bytes: this.maxBytes - this.outstandingBytes,
      }),
      deliver: (batch) => this.receive(batch),
    });
  }

  get outstanding(): number {
    return this.outstandingMessages;
  }

  private receive(batch: ReceivedMessage[]): void {
    const ordered = this.handle.spec.enableMessageOrdering;
    for (const m of batch) {
      this.outstandingMessages++;
      this.outstandingBytes += messageSize(m.message);
      const key = m.message.orderingKey;
      if (ordered && key !== '') {
        const next = (this.chains.get(key) ?? Promise.resolve()).then(() => this.run(m));
        this.chains.set(key, next);
        this.track(
          next.then(() => {
            if (this.chains.get(key) === next) this.chains.delete(key);
          }),
        );
      } else {
        this.track(this.run(m));
      }
    }
  }

  /** Every promise the subscriber starts is tracked (close waits for them) and never rejects. */
  private track(p: Promise<unknown>): void {
    this.running.add(p);
    const done = () => this.running.delete(p);
    p.then(done, done);
  }

  private async run(m: ReceivedMessage): Promise<void> {
    try {
      // A nack or expiry of an earlier message of the key revoked this delivery: it will come again.
      if (!this.handle.isLive(m.ackId)) return;
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
      this.handle.kick();
    }
  }

  /** 1 = ack, 0 = nack. A subscription deleted meanwhile makes both moot. */
  private settle(m: ReceivedMessage, ack: 0 | 1): void {
    if (!this.handle.attached) return;
    if (!ack) {
      this.handle.modifyAckDeadline([m.ackId], 0);
      return;
    }
    if (this.acks.push(m) === 1) queueMicrotask(() => this.sendAcks());
  }

  /**
   * One acknowledge for the acks of handlers that finished together (a delivered batch's handlers all
   * finish in the same run of microtasks): one durable write to wait for instead of one per message, and
   * still in the same turn of the event loop as the handlers.
   */
  private sendAcks(): void {
    const acked = this.acks;
    this.acks = [];
    if (!acked.length || !this.handle.attached) return;
    this.track(
      this.handle.acknowledge(acked.map((m) => m.ackId)).catch((e: unknown) => {
        for (const m of acked) this.report(e, m);
      }),
    );
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

  /** Stops taking messages, lets running handlers finish (not-yet-started ones are nacked), then detaches. */
  async close(): Promise<void> {
    this.closing = true;
    while (this.running.size || this.acks.length) {
      this.sendAcks();
      await Promise.allSettled([...this.running]);
    }
    this.handle.detach();
    this.release();
  }
}

/** A limit of 0, a negative one or NaN left the subscriber no room: it was attached and never given a message. */
function positive(field: string, value: number): number {
  if (!(value > 0)) throw new InvalidArgumentError(field, `must be a positive number, got ${value}`);
  return value;
}
