import { messageSize, type ReceivedMessage } from '../core/message.js';
import type { PubSubCore } from '../core/pubsub-core.js';
import type { ConsumerSpec, SubscriptionHandle, SubscriptionState } from '../core/consumer.js';
import type { Logger } from '../log.js';
import { Backoff } from './backoff.js';
import { SinkStateError, type Connector, type ConnectorCounters, type WriteResult } from './connector.js';

export interface ExportRunnerOptions {
  core: PubSubCore;
  subscription: string;
  connector: Connector;
  logger: Logger;
  /** Most messages handed to one `write` (default 5000: fewer, larger sink transactions). */
  maxBatchMessages?: number;
  /**
   * Most messages held (delivered, not yet acked) at once (default 20,000). A buffering connector that
   * holds this many is asked to finalize them (`flush('all')`), so this also caps a rolling file.
   */
  maxOutstandingMessages?: number;
  /** Most payload bytes held at once (default 256 MiB), the same way. */
  maxOutstandingBytes?: number;
  /** How often `flush('due')` runs, in ms (default 1000). */
  flushIntervalMs?: number;
  /** Backoff for reopening a sink in an error state (default 1 s doubling to 60 s). */
  backoff?: Backoff;
}

export interface ExportStats {
  written: number;
  failed: number;
  batches: number;
  state: SubscriptionState;
}

type Op = { kind: 'write' } | { kind: 'flush'; mode: 'due' | 'all' };

/** The runner's default budget of unsettled deliveries (ConnectorContext.budget). */
export const DEFAULT_BUDGET = { messages: 20_000, bytes: 256 * 1024 * 1024 };

/**
 * Drives one connector from one subscription: takes ordered batches from the core (a key has one batch
 * out at a time), hands them to the connector one call at a time, keeps the leases of everything the
 * connector holds alive, acks only what it reports written, nacks what failed (so the subscription's
 * retryPolicy and deadLetterPolicy apply), and turns sink-wide errors into the subscription's state.
 */
export class ExportRunner {
  readonly stats: ExportStats = { written: 0, failed: 0, batches: 0, state: 'ACTIVE' };
  private readonly pending: ReceivedMessage[] = [];
  /** Delivered and not yet settled: pending, being written, or buffered by the connector. */
  private readonly held = new Map<string, ReceivedMessage>();
  private heldBytes = 0;
  private readonly consumer: ConsumerSpec;
  private handle?: SubscriptionHandle;
  private readonly maxBatch: number;
  private readonly maxOutstanding: number;
  private readonly maxOutstandingBytes: number;
  private readonly backoff: Backoff;
  private readonly timers: { cancel(): void }[] = [];
  private wake?: () => void;
  private wakeOnStop?: () => void;
  private readonly lastLogged = new Map<string, number>();
  private flushDue = false;
  private stopping = false;
  private loop?: Promise<void>;
  private markReady!: () => void;
  /** Resolves once the sink is open and messages flow to it. */
  readonly ready = new Promise<void>((resolve) => (this.markReady = resolve));

  constructor(private readonly options: ExportRunnerOptions) {
    this.maxBatch = options.maxBatchMessages ?? 5000;
    this.maxOutstanding = options.maxOutstandingMessages ?? DEFAULT_BUDGET.messages;
    this.maxOutstandingBytes = options.maxOutstandingBytes ?? DEFAULT_BUDGET.bytes;
    this.backoff = options.backoff ?? new Backoff();
    this.consumer = {
      affinity: `export-${options.subscription}`,
      maxPerKey: this.maxBatch,
      pipelined: true,
      // What the connector holds (an open file, a pending upload) stays leased until it is settled.
      keepAliveSeconds: Number.POSITIVE_INFINITY,
      room: () => ({ messages: this.stopping ? 0 : this.maxOutstanding - this.held.size, bytes: this.maxOutstandingBytes - this.heldBytes }),
      deliver: (batch) => {
        for (const m of batch) {
          this.held.set(m.ackId, m);
          this.heldBytes += messageSize(m.message);
          this.pending.push(m);
        }
        this.wake?.();
      },
    };
  }

  private get core(): PubSubCore {
    return this.options.core;
  }

  /** Opens the connector (retrying while the sink is in an error state) and starts exporting. */
  start(): void {
    const { core } = this.options;
    this.timers.push(
      core.clock.setInterval(() => {
        this.flushDue = true;
        this.wake?.();
      }, this.options.flushIntervalMs ?? 1000),
    );
    this.loop = this.run().catch((e: unknown) => {
      this.options.logger.error({ subscription: this.options.subscription, error: (e as Error).stack ?? String(e) }, 'export runner stopped by an unexpected error');
    });
  }

  private async run(): Promise<void> {
    const opened = await this.untilUsable(async () => {
      await this.options.connector.open();
      return true;
    });
    if (!opened) return;
    this.handle = this.core.attach(this.options.subscription, this.consumer);
    this.markReady();
    // On stop, what was already delivered is still written (drain); nothing new arrives.
    while (!this.stopping || this.pending.length) {
      const op = this.nextOp();
      if (!op) {
        if (this.stopping) break;
        await new Promise<void>((resolve) => (this.wake = resolve));
        this.wake = undefined;
        continue;
      }
      await this.perform(op);
    }
  }

  /** A connector finished buffered work in the background: collect it soon. */
  requestFlush(): void {
    this.flushDue = true;
    this.wake?.();
  }

  /** Forgets a settled delivery; false if it was not held (already settled). */
  private release(id: string): boolean {
    const m = this.held.get(id);
    if (!m) return false;
    this.held.delete(id);
    this.heldBytes -= messageSize(m.message);
    return true;
  }

  private nextOp(): Op | undefined {
    if (this.pending.length) return { kind: 'write' };
    // Full of buffered messages: the connector must finalize what it holds, or nothing moves again.
    if (this.held.size >= this.maxOutstanding || this.heldBytes >= this.maxOutstandingBytes) return { kind: 'flush', mode: 'all' };
    if (this.flushDue) {
      this.flushDue = false;
      return { kind: 'flush', mode: 'due' };
    }
    return undefined;
  }

  private async perform(op: Op): Promise<void> {
    const connector = this.options.connector;
    if (op.kind === 'flush') {
      const result = await this.untilUsable(() => connector.flush(op.mode));
      if (result) this.apply(result);
      return;
    }
    // An earlier failure of a key revokes its later deliveries (they come again, in order): drop those.
    const handle = this.handle!;
    const batch: ReceivedMessage[] = [];
    for (const m of this.pending.splice(0, this.maxBatch)) {
      if (handle.isLive(m.ackId)) batch.push(m);
      else this.release(m.ackId);
    }
    if (!batch.length) return;
    this.stats.batches++;
    let result: WriteResult | undefined;
    try {
      result = await this.untilUsable(() =>
        connector.write(batch.map((m) => ({ id: m.ackId, message: m.message, deliveryAttempt: m.deliveryAttempt }))),
      );
    } catch (e) {
      const error = e instanceof Error ? e.message : String(e);
      this.logThrottled('error', { error }, 'export write failed; batch nacked and retried with backoff');
      result = { written: [], failed: batch.map((m) => ({ id: m.ackId, error, retryable: true })), deferred: [] };
    }
    if (result) this.apply(result);
  }

  /**
   * Runs a connector call, retrying with backoff while it throws SinkStateError (the subscription shows
   * that state meanwhile). Undefined if stopped first. Other errors propagate.
   */
  private async untilUsable<T>(call: () => Promise<T>): Promise<T | undefined> {
    for (;;) {
      try {
        const result = await call();
        this.setState('ACTIVE');
        this.backoff.reset();
        return result;
      } catch (e) {
        if (!(e instanceof SinkStateError)) throw e;
        this.setState(e.state, e.message);
        if (this.stopping) return undefined;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, this.backoff.next());
          this.wakeOnStop = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        this.wakeOnStop = undefined;
        if (this.stopping) return undefined;
      }
    }
  }

  private setState(state: SubscriptionState, reason?: string): void {
    if (state === this.stats.state) return;
    this.stats.state = state;
    const { subscription, logger, core } = this.options;
    if (core.hasSubscription(subscription)) core.setSubscriptionState(subscription, state);
    if (state === 'ACTIVE') logger.info({ subscription, state }, 'export sink usable again; subscription ACTIVE');
    else logger.warn({ subscription, state, reason }, `export sink unusable; subscription ${state}, backlog kept, retrying with backoff`);
  }

  private apply(result: WriteResult): void {
    const handle = this.handle;
    const acks = result.written.filter((id) => this.release(id));
    this.stats.written += acks.length;
    for (const id of result.deferred) this.release(id);
    const permanent = result.failed.filter((f) => !f.retryable);
    if (permanent.length) {
      this.logThrottled('warn', { count: permanent.length, example: permanent[0]!.error }, 'messages cannot be written; nacked (dead-lettered after maxDeliveryAttempts)');
    }
    const failed = result.failed.filter((f) => this.release(f.id));
    this.stats.failed += failed.length;
    if (!handle?.attached) return;
    for (const f of failed) handle.modifyAckDeadline([f.id], 0, f.error);
    if (!acks.length) return;
    // Not awaited: the next write need not wait for the ack's own commit. An ack lost to a crash only
    // means a redelivery, which connectors recognise (or the at-least-once contract allows).
    handle.acknowledge(acks).catch((e: unknown) =>
      this.logThrottled('error', { error: (e as Error).message }, 'recording acks failed; the messages will be delivered again'),
    );
  }

  /** Failures repeat on every retry; one line per 10 s is enough to see them. */
  private logThrottled(level: 'warn' | 'error', fields: Record<string, unknown>, message: string): void {
    const now = Date.now();
    if (now - (this.lastLogged.get(message) ?? 0) < 10_000) return;
    this.lastLogged.set(message, now);
    this.options.logger[level]({ subscription: this.options.subscription, ...fields }, message);
  }

  /** The connector's own totals (rows appended, objects written, ...), when it keeps them. */
  get connectorCounters(): Readonly<ConnectorCounters> | undefined {
    return this.options.connector.counters;
  }

  /** Messages delivered to the runner and not yet acked or nacked. */
  get outstanding(): number {
    return this.held.size;
  }

  /**
   * Stops taking messages, finishes the write in progress, finalizes what the connector buffers
   * (`flush('all')`), acks it, and closes the connector.
   */
  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.wake?.();
    this.wakeOnStop?.();
    await this.loop;
    const { subscription, connector } = this.options;
    if (this.stats.state === 'ACTIVE') {
      try {
        this.apply(await connector.flush('all'));
      } catch (e) {
        this.options.logger.error({ subscription, error: (e as Error).message }, 'final flush failed; unacked messages will be delivered again');
      }
    }
    // Detached only now: until the final flush is acked, the core keeps what the connector holds leased.
    this.handle?.detach();
    for (const t of this.timers) t.cancel();
    await connector.close();
  }
}
