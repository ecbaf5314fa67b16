import { systemClock, type Clock } from '../core/clock.js';
import type { SubscriptionState } from '../core/consumer.js';
import type { ReceivedMessage } from '../core/message.js';
import type { SubscriptionSpec } from '../core/subscription-config.js';
import type { Logger } from '../log.js';
import { Backoff } from './backoff.js';
import { HeldDeliveries } from './held-deliveries.js';
import { SinkBusyError, SinkStateError, type Connector, type ConnectorCounters, type WriteResult } from './connector.js';
import {
  REFUSED_RETRY_MS,
  SourceError,
  type DeliveryHandle,
  type ExportSource,
  type SourceConsumer,
  type SourceStatus,
} from './sources/source.js';

export interface ExportRunnerOptions {
  /** Where the subscription is read from: the embedded core or a remote Pub/Sub. */
  source: ExportSource;
  /**
   * Makes a connector for the subscription's settings (as the source reported them): the first one, and a
   * new one after an unexpected failure of the one before.
   */
  createConnector: (spec: SubscriptionSpec) => Connector;
  logger: Logger;
  /** This worker's id, shown in status (set for exports a fleet of workers shares). */
  workerId?: string;
  /** Drives the flush interval (default: real time). */
  clock?: Clock;
  /** Most messages handed to one `write` (default 5000: fewer, larger sink transactions). */
  maxBatchMessages?: number;
  /**
   * Most messages held (delivered, not yet acked) at once (default 20,000). A buffering connector that
   * holds this many is asked to finalize them (`flush('all')`), so this also caps a rolling file.
   */
  maxOutstandingMessages?: number;
  /** Most payload bytes held at once (default 64 MiB), the same way. */
  maxOutstandingBytes?: number;
  /** How often `flush('due')` runs, in ms (default 1000). */
  flushIntervalMs?: number;
  /**
   * When set: once nothing was delivered for this long, everything held is finalized (`flush('all')`), on
   * a timer of its own in real time (with a `clock` given: checked at each flush interval). For sources
   * that send a key's next messages only once its earlier ones are acked (a remote ordered subscription):
   * a connector's open file would otherwise hold its keys back until it rolls by itself (maxDuration),
   * while no more of them can come to fill it. Applies while the subscription, as its source reports it, is
   * ordered: that, not whether the export asks for per-key order, is what holds the keys back.
   */
  idleFlushMs?: number;
  /** Backoff for retrying a sink in an error state, and a source that cannot be reached (default 1 s doubling to 60 s). */
  backoff?: () => Backoff;
  /** How often a standby retries a sink another process holds, in ms (default 1000). */
  standbyRetryMs?: number;
  /** How long a connector call runs before status shows it as stalled, in ms (default 30 s). */
  stallMs?: number;
  /**
   * Told the sink's first state and each change of state or reason after it (not every batch's ACTIVE),
   * so the job can keep the last one for `orderly status` while it is stopped.
   */
  onState?: (state: SubscriptionState, reason: string | undefined) => void;
  /**
   * The totals of the stopped runner of the same subscription this one replaces (its export section
   * changed; `ExportRunner.totals`): they go on counting here, as totals count from the process's start.
   * What describes the sink now (state, standby, stalled, last commit) starts afresh with the new section.
   */
  continues?: ExportTotals;
}

/** A runner's running totals, which a runner replacing it carries on. */
export interface ExportTotals {
  stats: Pick<ExportStats, 'written' | 'failed' | 'batches' | 'errors'>;
  connectorCounters?: ConnectorCounters;
}

export interface ExportStats {
  written: number;
  failed: number;
  batches: number;
  state: SubscriptionState;
  /** While the state is not ACTIVE: why (the sink's error). */
  stateReason?: string;
  /** Unexpected failures of the sink so far (each closes the connector; a new one is opened). */
  errors: number;
  /** The sink's last failure, kept after it recovered. */
  lastError?: { message: string; at: string };
  /** The last message the sink refused (counted in `failed`: nacked, dead-lettered past maxDeliveryAttempts). */
  lastRefusal?: { message: string; at: string };
  /** While another process holds the sink (this worker waits as a standby): why. */
  standby?: string;
  /** When messages were last acked as durable at the sink (ISO time). */
  lastCommitAt?: string;
  /** While a call of the connector has not returned for `stallMs` or more: which, and for how long. */
  stalled?: string;
  /** While the source cannot be reached: when the next attempt is due (ISO time). */
  sourceRetryAt?: string;
}

type Op = { kind: 'write' } | { kind: 'flush'; mode: 'due' | 'all' };

/** A connector call running this long is shown in status (`stalled`) and logged: a hung sink is not silent. */
const DEFAULT_STALL_MS = 30_000;
/**
 * Written deliveries settled (forgotten and acked) per turn of the event loop. A write result can settle
 * thousands of messages (a committed file or batch), and acking them in the turn that applies it held the
 * loop for most of that turn: at a 300k-message text export drain, applying a result of 4,000+ messages
 * took a median 8.7-9.9 ms (p90 17-19) with every ack at once, 4.2-4.7 ms (p90 7-8) in slices of 1,000.
 * Forgetting them (`release`) went in slices too at stop 47: done at once for a 5,000-message result it
 * still took up to 11-15 ms of the main thread's CPU in the Parquet and DuckDB drains. 500 keeps it near
 * SLICE_MS (loop-slice.ts), like the other busy parts' slices.
 */
const ACK_SLICE = 500;

/** The runner's default budget of unsettled deliveries (ConnectorContext.budget). */
export const DEFAULT_BUDGET = { messages: 20_000, bytes: 64 * 1024 * 1024 };

/**
 * Drives one connector from one subscription: takes ordered deliveries from its source (the embedded core
 * or a remote Pub/Sub), hands them to the connector one call at a time, keeps the leases of everything the
 * connector holds alive, acks only what it reports written, nacks what failed (so the subscription's
 * retryPolicy and deadLetterPolicy apply), and turns sink failures into the subscription's state: a
 * SinkStateError's state, or RESOURCE_ERROR for anything unexpected — then the connector is closed and,
 * after a backoff, a new one is opened and given everything unsettled again. A source that cannot be
 * reached is retried with backoff the same way (its state shown in status). It never stops by itself.
 */
export class ExportRunner {
  readonly stats: ExportStats = { written: 0, failed: 0, batches: 0, state: 'ACTIVE', errors: 0 };
  /** The state and reason last given to options.onState (none yet: the sink has not been tried). */
  private toldState?: string;
  private readonly pending: ReceivedMessage[] = [];
  /** Delivered and not yet settled: pending, being written, or buffered by the connector. */
  private readonly held = new HeldDeliveries();
  /**
   * Messages that came again while an earlier delivery of each was held (a seek; a lease that ran out).
   * If the connector has the earlier one, what it holds is finalized before anything more is written, so
   * the copy finds the first one written and is acked as a duplicate, rather than going into the same open
   * file a second time, out of order.
   */
  private readonly redelivered: string[] = [];
  /**
   * The subscription was sought: what the connector holds is finalized before anything the seek brings is
   * written. The replay may bring a key's messages the sink never had (acked by an earlier seek, or from
   * before the subscription existed) ahead of those its open file holds, and a seek forward skips a key's
   * messages the file's range would otherwise span: either way a file's per-key sequence range would no
   * longer be what it holds, and the sink would take messages it lacks for written.
   */
  private soughtFlushDue = false;
  private readonly consumer: SourceConsumer;
  /** The port to the subscription, once attached; inert once the subscription is deleted. */
  private handle?: DeliveryHandle;
  /** The subscription's settings, as the source last reported them. */
  private spec?: SubscriptionSpec;
  private readonly maxBatch: number;
  private readonly maxOutstanding: number;
  private readonly maxOutstandingBytes: number;
  private readonly backoff: Backoff;
  private readonly sourceBackoff: Backoff;
  private readonly timers: { cancel(): void }[] = [];
  /** The open connector (after a stop, the last one); undefined while none is open. */
  private connector?: Connector;
  /** Totals of the connectors closed after failures, so the counters keep counting up. */
  private retired?: Record<string, number>;
  /** An unexpected failure happened, and no write or flush has settled a message (written or refused) since. */
  private faulted = false;
  private attached = false;
  private wake?: () => void;
  private wakeOnStop?: () => void;
  private readonly lastLogged = new Map<string, number>();
  private flushDue = false;
  /**
   * A `flush('all')` for the full budget released nothing: the next waits for the connector's notify or
   * the flush interval, so a connector finishing its work on a timer gets the event loop to do it.
   */
  private budgetFlushIdle = false;
  /** When the source last delivered, and whether what it delivered until then was finalized for idleness. */
  private lastDeliveryAt = 0;
  private idleFlushDue = false;
  private idleFlushed = true;
  /** In real time: the timer that checks for idleness once idleFlushMs after the last delivery may have passed. */
  private idleTimer?: NodeJS.Timeout;
  private stopping = false;
  /**
   * Deliveries the connector reported written, not yet released and acked, and whether a turn of the event
   * loop will settle the next slice (sendAcks). They count as held until then.
   */
  private readonly ackQueue: string[] = [];
  private ackTurnScheduled = false;
  /** The connector call in progress (write, flush), and when it began. */
  private inCall?: { name: string; since: number };
  private loop?: Promise<void>;
  private markReady!: () => void;
  /** Resolves once the sink is open and messages flow to it. */
  readonly ready = new Promise<void>((resolve) => (this.markReady = resolve));

  private get clock(): Clock {
    return this.options.clock ?? systemClock;
  }

  constructor(private readonly options: ExportRunnerOptions) {
    if (options.continues) {
      Object.assign(this.stats, options.continues.stats);
      this.retired = options.continues.connectorCounters && { ...options.continues.connectorCounters };
    }
    this.maxBatch = options.maxBatchMessages ?? 5000;
    this.maxOutstanding = options.maxOutstandingMessages ?? DEFAULT_BUDGET.messages;
    this.maxOutstandingBytes = options.maxOutstandingBytes ?? DEFAULT_BUDGET.bytes;
    this.backoff = options.backoff?.() ?? new Backoff();
    this.sourceBackoff = options.backoff?.() ?? new Backoff();
    this.consumer = {
      room: () => ({
        messages: this.stopping ? 0 : this.maxOutstanding - this.held.size,
        bytes: this.maxOutstandingBytes - this.held.bytes,
      }),
      deliver: (batch) => {
        this.lastDeliveryAt = this.clock.now();
        this.idleFlushed = false;
        this.armIdleCheck();
        this.budgetFlushIdle = false;
        for (const m of batch) {
          if (this.held.add(m)) this.redelivered.push(m.message.messageId);
          this.pending.push(m);
        }
        this.wake?.();
      },
      sought: () => {
        this.soughtFlushDue = true;
        this.wake?.();
      },
    };
  }

  /** The subscription's handle while it is the one this runner serves (not deleted, not created again). */
  private live(): DeliveryHandle | undefined {
    return this.handle?.attached ? this.handle : undefined;
  }

  get subscription(): string {
    return this.options.source.subscription;
  }

  /** Reaches the subscription (retrying while the source fails), opens a connector (retrying while the sink fails) and starts exporting. */
  start(): void {
    const { subscription } = this;
    this.timers.push(
      this.clock.setInterval(() => {
        this.flushDue = true;
        this.budgetFlushIdle = false;
        this.noteStall();
        this.noteIdle();
        this.wake?.();
      }, this.options.flushIntervalMs ?? 1000),
    );
    this.loop = this.run().catch((e: unknown) => {
      // A defect of the runner itself: shown in the subscription's state, not only in a log line.
      this.setState('RESOURCE_ERROR', `the export runner stopped: ${errorText(e)}`);
      this.options.logger.error({ subscription, error: errorStack(e) }, 'export runner stopped by an unexpected error');
    });
  }

  private async run(): Promise<void> {
    this.spec = await this.reachSource();
    if (!this.spec) return;
    while (!this.stopping) {
      const connector = await this.open();
      if (!connector) return;
      if (!this.attached) {
        this.attached = true;
        this.handle = this.options.source.attach(this.consumer);
        this.markReady();
      }
      try {
        await this.pump(connector);
        return;
      } catch (e) {
        await this.fail(connector, e);
        if (!(await this.pause())) return;
      }
    }
  }

  /** The subscription's settings once the source can serve it; while it cannot, its state shows why (retried with backoff). */
  private async reachSource(): Promise<SubscriptionSpec | undefined> {
    for (;;) {
      try {
        const spec = await this.options.source.prepare();
        this.sourceBackoff.reset();
        this.stats.sourceRetryAt = undefined;
        return spec;
      } catch (e) {
        if (!(e instanceof SourceError)) throw e;
        const delay = e.kind === 'refused' ? REFUSED_RETRY_MS : this.sourceBackoff.next();
        this.stats.sourceRetryAt = new Date(Date.now() + delay).toISOString();
        this.logThrottled(
          'error',
          { error: e.message, retryInMs: delay },
          'the export cannot read its subscription; retrying with backoff',
        );
        if (!(await this.pause(delay))) return undefined;
      }
    }
  }

  /** A new, open connector; while opening fails, the failure is the state and it is retried with backoff. */
  private async open(): Promise<Connector | undefined> {
    for (;;) {
      let connector: Connector | undefined;
      try {
        connector = this.options.createConnector(this.spec!);
        const opening = connector;
        await this.call('open', () => opening.open());
        this.connector = connector;
        // The log said it waits as a standby: it must say too that the wait is over, or it reads as waiting still.
        if (this.stats.standby)
          this.options.logger.info({ subscription: this.subscription }, 'export took its sink over; no longer a standby');
        this.stats.standby = undefined;
        // After an unexpected failure, ACTIVE waits for a write or flush that works.
        if (!this.faulted) this.usable();
        return connector;
      } catch (e) {
        if (connector) await this.retire(connector);
        if (e instanceof SinkBusyError) {
          // Another worker holds the sink: wait for it, neither an error nor a growing backoff.
          if (!this.stats.standby)
            this.options.logger.info({ subscription: this.subscription, reason: e.message }, 'export waiting as a standby');
          this.stats.standby = e.message;
          if (this.attached) await this.standDown();
          if (!(await this.pause(this.options.standbyRetryMs ?? 1000))) return undefined;
          continue;
        }
        // Took the sink over, or never waited for it: what stops it now is this error, not another holder.
        this.stats.standby = undefined;
        this.unusable(e);
        if (!(e instanceof SinkStateError))
          this.logThrottled('error', { error: errorText(e) }, 'export sink cannot be opened; retrying with backoff');
        if (!(await this.pause())) return undefined;
      }
    }
  }

  /**
   * The sink failed and another process took it over meanwhile (a fleet's standby took the DuckDB file
   * once it was deleted or replaced under this worker): what this runner holds goes back to the
   * subscription, which delivers it to the worker that writes now, and nothing more is taken until this
   * one opens the sink again. Kept, it stayed leased (up to maxExtensionMinutes) while no one wrote it,
   * and its ordering keys waited behind it.
   */
  private async standDown(): Promise<void> {
    this.sendAcks();
    const handle = this.handle;
    this.handle = undefined;
    this.attached = false;
    this.pending.length = 0;
    this.held.clear();
    this.redelivered.length = 0;
    await handle?.detach();
    // The failure that stopped it is not what stops it now (the sink is whole: another process writes it).
    // Left as the state, it read RESOURCE_ERROR, "nothing more is acked until it is whole again", for as
    // long as it waited; a standby is ACTIVE, `standby` saying why it exports nothing (the error stays in
    // lastExportError).
    this.faulted = false;
    this.setState('ACTIVE');
  }

  /** Writes and flushes until stopped (then drains what was delivered). Throws an unexpected sink failure. */
  private async pump(connector: Connector): Promise<void> {
    while (!this.stopping || this.pending.length) {
      const op = this.nextOp();
      if (!op) {
        if (this.stopping) break;
        await new Promise<void>((resolve) => (this.wake = resolve));
        this.wake = undefined;
        continue;
      }
      await this.perform(connector, op);
    }
  }

  /**
   * After an unexpected failure: the connector goes, and the next one gets everything still held, in
   * delivery order (so each key in order) — what the old one buffered or was writing. What it had made
   * durable already, the next one finds at the sink and reports written without writing it again.
   */
  private async fail(connector: Connector, e: unknown): Promise<void> {
    this.unusable(e);
    this.logThrottled(
      'error',
      { error: errorStack(e) },
      'export sink failed; subscription RESOURCE_ERROR, reopening it with backoff (backlog kept, nothing nacked)',
    );
    this.connector = undefined;
    await this.retire(connector);
    // What the connector reported written is settled, not given to the next one again.
    this.sendAcks();
    this.pending.length = 0;
    this.pending.push(...this.held.values());
  }

  private async retire(connector: Connector): Promise<void> {
    const counters = this.countersOf(connector);
    if (counters) this.retired = addCounters(this.retired ?? {}, counters);
    try {
      await connector.close();
    } catch (e) {
      this.logThrottled('warn', { error: errorText(e) }, 'closing a failed export connector failed');
    }
  }

  /** Waits out the backoff (or `ms`); false if stopped meanwhile. */
  private async pause(ms = this.backoff.next()): Promise<boolean> {
    if (this.stopping) return false;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wakeOnStop = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    this.wakeOnStop = undefined;
    return !this.stopping;
  }

  /** Runs a connector call, known as `name` to the stall check while it runs. */
  private async call<T>(name: string, run: () => Promise<T>): Promise<T> {
    this.inCall = { name, since: Date.now() };
    try {
      return await run();
    } finally {
      this.inCall = undefined;
      // The call's own stall ends here; the connector's background work may still be stalled.
      this.noteStall();
    }
  }

  /**
   * At each flush interval and as each call returns: a call that has not returned for `stallMs`, or the
   * connector's background work (Connector.busy) running that long, shows in status, and in the log.
   */
  private noteStall(): void {
    let background: { name: string; since: number } | undefined;
    try {
      background = this.connector?.busy?.();
    } catch (e) {
      // On a timer and in a call's `finally`: a connector that breaks its contract must not crash the job.
      this.logThrottled('warn', { error: errorText(e) }, "the export connector's busy() threw; its background work is not watched");
    }
    const work = this.inCall && (!background || this.inCall.since <= background.since) ? this.inCall : background;
    const ms = work ? Date.now() - work.since : 0;
    if (!work || ms < (this.options.stallMs ?? DEFAULT_STALL_MS)) {
      this.stats.stalled = undefined;
      return;
    }
    const seconds = Math.floor(ms / 1000);
    this.stats.stalled = `the export connector's ${work.name} has not returned for ${seconds} s`;
    this.logThrottled('warn', { call: work.name, seconds }, 'the export connector has not returned; its messages wait');
  }

  /**
   * Nothing delivered for idleFlushMs while messages are held: what the connector holds is finalized next.
   * (For an ordered remote source, those messages may be what holds their keys' next ones back.)
   */
  private noteIdle(): void {
    const { idleFlushMs } = this.options;
    if (idleFlushMs === undefined || !this.spec?.enableMessageOrdering || this.idleFlushed || !this.held.size) return;
    if (this.clock.now() - this.lastDeliveryAt < idleFlushMs) return;
    this.idleFlushed = true;
    this.idleFlushDue = true;
    this.wake?.();
  }

  /**
   * In real time (no `clock` given), idleness is checked when idleFlushMs after the last delivery has
   * passed, not only at the next flush interval: checked there alone, an idle flush came up to a whole
   * interval late (idleFlushSeconds 2 finalized 2-3 s after the last delivery). One timer at a time: one
   * that finds a later delivery was made sets itself again for the rest.
   */
  private armIdleCheck(): void {
    const { idleFlushMs } = this.options;
    if (idleFlushMs === undefined || this.options.clock || this.idleTimer || this.stopping) return;
    this.idleTimer = setTimeout(
      () => {
        this.idleTimer = undefined;
        this.noteIdle();
        if (!this.idleFlushed && this.held.size) this.armIdleCheck();
      },
      Math.max(0, this.lastDeliveryAt + idleFlushMs - this.clock.now()),
    );
    this.idleTimer.unref();
  }

  /** A connector finished buffered work in the background: collect it soon. */
  requestFlush(): void {
    this.flushDue = true;
    this.budgetFlushIdle = false;
    this.wake?.();
  }

  /**
   * Whether the connector has an earlier delivery of one of these messages. Revoked deliveries still
   * waiting to be written (a nacked key's later ones) are dropped first, as the next write would: they are
   * no copy the connector holds, and finalizing for them would only cut files short.
   */
  private connectorHasEarlierCopy(messageIds: string[]): boolean {
    const live = this.liveOnly(this.pending.splice(0));
    for (const m of live) this.pending.push(m);
    // Two copies both waiting (Pub/Sub may deliver a message twice, across streams) are no copy the
    // connector has: both go into one batch, where it recognises the second.
    const waiting = new Map<string, number>(messageIds.map((id) => [id, 0]));
    for (const m of this.pending) {
      const n = waiting.get(m.message.messageId);
      if (n !== undefined) waiting.set(m.message.messageId, n + 1);
    }
    return [...waiting].some(([id, n]) => this.held.count(id) > n);
  }

  /**
   * The deliveries still live, in order. An earlier failure of a key revokes its later deliveries (they
   * come again, in order): those are released.
   */
  private liveOnly(deliveries: ReceivedMessage[]): ReceivedMessage[] {
    const handle = this.live();
    return deliveries.filter((m) => {
      if (handle?.isLive(m.ackId)) return true;
      this.held.release(this.held.idOf(m));
      return false;
    });
  }

  private nextOp(): Op | undefined {
    if (this.soughtFlushDue) {
      this.soughtFlushDue = false;
      return { kind: 'flush', mode: 'all' };
    }
    if (this.redelivered.length && this.connectorHasEarlierCopy(this.redelivered.splice(0))) return { kind: 'flush', mode: 'all' };
    if (this.pending.length) return { kind: 'write' };
    // Full of buffered messages: the connector must finalize what it holds, or nothing moves again.
    // What waits in the ack queue is settled already: finalizing would release none of it.
    const full = this.held.size - this.ackQueue.length >= this.maxOutstanding || this.held.bytes >= this.maxOutstandingBytes;
    if (full && !this.budgetFlushIdle) return { kind: 'flush', mode: 'all' };
    if (this.idleFlushDue) {
      this.idleFlushDue = false;
      return { kind: 'flush', mode: 'all' };
    }
    if (this.flushDue) {
      this.flushDue = false;
      return { kind: 'flush', mode: 'due' };
    }
    return undefined;
  }

  private async perform(connector: Connector, op: Op): Promise<void> {
    if (op.kind === 'flush') {
      const result = await this.untilUsable(() => this.call(`flush('${op.mode}')`, () => connector.flush(op.mode)));
      const settled = result ? this.apply(result) : 0;
      if (op.mode === 'all' && settled === 0) this.budgetFlushIdle = true;
      return;
    }
    const batch = this.liveOnly(this.pending.splice(0, this.maxBatch));
    if (!batch.length) return;
    this.stats.batches++;
    const result = await this.untilUsable(() =>
      this.call('write', () =>
        connector.write(batch.map((m) => ({ id: this.held.idOf(m), message: m.message, deliveryAttempt: m.deliveryAttempt }))),
      ),
    );
    if (result) this.apply(result);
  }

  /**
   * Runs a connector call, retrying it with backoff while it throws SinkStateError (the subscription shows
   * that state meanwhile). Undefined if stopped first: then nothing delivered is written any more.
   * Any other error propagates.
   */
  private async untilUsable(call: () => Promise<WriteResult>): Promise<WriteResult | undefined> {
    for (;;) {
      try {
        const result = await call();
        if (this.provesUsable(result)) this.usable();
        return result;
      } catch (e) {
        if (!(e instanceof SinkStateError)) throw e;
        this.unusable(e);
        if (!(await this.pause())) {
          // The refused messages come again after a restart. Written now, the deliveries after them would
          // put a key's later messages in the sink first, and a sink that keeps a key's progress as its
          // highest sequence written (the DuckDB table) would take the refused ones for written.
          this.pending.length = 0;
          return undefined;
        }
      }
    }
  }

  /**
   * Whether a call that returned shows the sink usable. After an unexpected failure, a call that settled
   * nothing proves nothing: a write the sink only buffered (a DuckDB append, its commit failing next on a
   * full disk) made the export ACTIVE for a moment at each retry, the state and the log flapping once a
   * second, the backoff reset each time.
   */
  private provesUsable(result: WriteResult): boolean {
    return !this.faulted || result.written.length > 0 || result.failed.length > 0 || this.held.size === 0;
  }

  private usable(): void {
    this.faulted = false;
    this.backoff.reset();
    this.setState('ACTIVE');
  }

  /** The sink failed: a SinkStateError's state, or RESOURCE_ERROR with the error as the reason. */
  private unusable(e: unknown): void {
    const message = errorText(e);
    this.stats.lastError = { message, at: new Date().toISOString() };
    if (e instanceof SinkStateError) {
      this.setState(e.state, message);
      return;
    }
    this.faulted = true;
    this.stats.errors++;
    this.setState('RESOURCE_ERROR', message);
  }

  private setState(state: SubscriptionState, reason?: string): void {
    const changed = state !== this.stats.state;
    this.stats.state = state;
    this.stats.stateReason = state === 'ACTIVE' ? undefined : reason;
    const first = this.toldState === undefined;
    const told = `${state} ${this.stats.stateReason}`;
    if (told !== this.toldState) {
      this.toldState = told;
      this.options.onState?.(state, this.stats.stateReason);
    }
    if (!changed && !first) return;
    const { source, logger } = this.options;
    const subscription = this.subscription;
    // The first state goes to the source even when it is ACTIVE, as this runner starts: the subscription
    // may still hold the state its previous runner left (a table missing under the export config it replaced).
    source.setState(state, reason);
    if (!changed) return;
    if (state === 'ACTIVE') {
      if (!this.stats.standby) logger.info({ subscription, state }, 'export sink usable again; subscription ACTIVE');
    } else logger.warn({ subscription, state, reason }, `export sink unusable; subscription ${state}, backlog kept, retrying with backoff`);
  }

  /**
   * A failure's reason and its message's id, for the log: the reason alone did not say which message it
   * was (only the dead-letter topic did). Before the failure is released (`apply`).
   */
  private failureExample(f: WriteResult['failed'][number]): { example: string; exampleMessageId?: string } {
    return { example: f.error, exampleMessageId: this.held.get(f.id)?.message.messageId };
  }

  /** Applies a connector's result; returns how many held deliveries it settled (written ones included, though released in slices). */
  private apply(result: WriteResult): number {
    let settled = 0;
    const permanent = result.failed.filter((f) => !f.retryable);
    if (permanent.length) {
      this.logThrottled(
        'warn',
        { count: permanent.length, ...this.failureExample(permanent[0]!) },
        this.spec?.deadLetterPolicy
          ? 'messages cannot be written; nacked (dead-lettered after maxDeliveryAttempts)'
          : 'messages cannot be written; nacked and delivered again after the retry backoff (no deadLetterPolicy: each stays, and its ordering key waits behind it)',
      );
    }
    // A refusal that may pass (an upload the bucket turned down) is logged too: one that never passes
    // showed only in status (exportRefused), with the log silent however long it lasted.
    const retryable = result.failed.filter((f) => f.retryable);
    if (retryable.length) {
      this.logThrottled(
        'warn',
        { count: retryable.length, ...this.failureExample(retryable[0]!) },
        'messages could not be written; nacked and delivered again after the retry backoff',
      );
    }
    const handle = this.live();
    // Acks still queued from earlier results go before any nack, which would revoke what they ack.
    if (result.failed.length || result.deferred.length) this.sendAcks();
    // Failures first: a nack revokes the key's later deliveries at the source, the deferred ones included.
    for (const f of result.failed) {
      const m = this.held.release(f.id);
      if (!m) continue;
      settled++;
      this.stats.failed++;
      this.stats.lastRefusal = { message: f.error, at: new Date().toISOString() };
      handle?.nack([m.ackId], f.error);
    }
    // A deferral stands on a failure of its key before it, whose nack revoked it at the source. One still
    // live had none: it is nacked too, so it comes again in order instead of staying leased while its key
    // moves on.
    const orphans: string[] = [];
    for (const id of result.deferred) {
      const m = this.held.release(id);
      if (!m) continue;
      settled++;
      if (handle?.isLive(m.ackId)) orphans.push(m.ackId);
    }
    if (orphans.length) {
      this.logThrottled(
        'error',
        { count: orphans.length },
        'the export connector deferred messages without a failure of their key before them; nacked, so they come again in order',
      );
      handle!.nack(orphans, 'deferred by the export connector without a failure of its key before it');
    }
    // Released with their acks, a slice per turn (sendAcks): held until then.
    for (const id of result.written) {
      if (!this.held.has(id)) continue;
      this.ackQueue.push(id);
      settled++;
    }
    this.sendAcks(ACK_SLICE);
    return settled;
  }

  /**
   * Releases up to `max` written deliveries and hands their acks to the source now; the rest follow,
   * ACK_SLICE per turn of the event loop. Their commits are not awaited: the next write need not wait for
   * them, and an ack lost to a crash only means a redelivery, which connectors recognise (or the
   * at-least-once contract allows). Once the subscription is gone (deleted, created again), the acks are
   * moot: only released.
   */
  private sendAcks(max = Number.POSITIVE_INFINITY): void {
    const ids = this.ackQueue.splice(0, max);
    const acks: string[] = [];
    for (const id of ids) {
      const m = this.held.release(id);
      if (m) acks.push(m.ackId);
    }
    this.stats.written += acks.length;
    if (acks.length) this.stats.lastCommitAt = new Date().toISOString();
    const handle = this.live();
    if (acks.length && handle)
      handle
        .acknowledge(acks)
        .catch((e: unknown) =>
          this.logThrottled('error', { error: errorText(e) }, 'recording acks failed; the messages will be delivered again'),
        );
    if (this.ackQueue.length && !this.ackTurnScheduled) {
      this.ackTurnScheduled = true;
      setImmediate(() => {
        this.ackTurnScheduled = false;
        this.sendAcks(ACK_SLICE);
      });
    }
  }

  /** Failures repeat on every retry; one line per 10 s is enough to see them. */
  private logThrottled(level: 'warn' | 'error', fields: Record<string, unknown>, message: string): void {
    const now = Date.now();
    if (now - (this.lastLogged.get(message) ?? 0) < 10_000) return;
    this.lastLogged.set(message, now);
    this.options.logger[level]({ subscription: this.subscription, ...fields }, message);
  }

  /** What a runner replacing this one (after it stopped) carries on: see ExportRunnerOptions.continues. */
  get totals(): ExportTotals {
    const { written, failed, batches, errors } = this.stats;
    return { stats: { written, failed, batches, errors }, connectorCounters: this.connectorCounters };
  }

  /** The connectors' own totals (rows appended, objects written, ...), when they keep them. */
  get connectorCounters(): ConnectorCounters | undefined {
    const current = this.connector && this.countersOf(this.connector);
    if (!this.retired) return current;
    return current ? addCounters({ ...this.retired }, current) : this.retired;
  }

  /**
   * A connector's `counters`, read so that a getter that throws (a bug of the connector) neither stops
   * the runner (retiring a failed connector reads them) nor breaks status and metrics: logged, and none.
   */
  private countersOf(connector: Connector): ConnectorCounters | undefined {
    try {
      return connector.counters;
    } catch (e) {
      this.logThrottled('warn', { error: errorText(e) }, "reading the export connector's counters failed");
      return undefined;
    }
  }

  /** Messages delivered to the runner and not yet acked or nacked. */
  get outstanding(): number {
    return this.held.size;
  }

  /** The most deliveries it holds unsettled (ExportRunnerOptions.maxOutstandingMessages, or its connector's). */
  get budget(): number {
    return this.maxOutstanding;
  }

  /** Ordering keys with messages delivered to the runner and not yet settled. */
  keysInFlight(): number {
    const keys = new Set<string>();
    for (const m of this.held.values()) if (m.message.orderingKey) keys.add(m.message.orderingKey);
    return keys.size;
  }

  /** The source's own condition (reachable, streaming, or why not). */
  sourceStatus(): SourceStatus {
    return this.options.source.status();
  }

  get workerId(): string | undefined {
    return this.options.workerId;
  }

  /**
   * Stops taking messages, finishes the write in progress, finalizes what the connector buffers
   * (`flush('all')`), acks it, and closes the connector.
   */
  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    clearTimeout(this.idleTimer);
    this.wake?.();
    this.wakeOnStop?.();
    await this.loop;
    const connector = this.connector;
    if (connector && this.stats.state === 'ACTIVE') {
      try {
        this.apply(await connector.flush('all'));
      } catch (e) {
        this.options.logger.error(
          { subscription: this.subscription, error: errorText(e) },
          'final flush failed; unacked messages will be delivered again',
        );
      }
    }
    // Detached only now, every queued ack handed over: until the final flush is acked, the core keeps what
    // the connector holds leased.
    this.sendAcks();
    await this.handle?.detach();
    for (const t of this.timers) t.cancel();
    try {
      await connector?.close();
    } catch (e) {
      this.options.logger.error({ subscription: this.subscription, error: errorText(e) }, 'closing the export connector failed');
    }
  }
}

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** A connector may reject with anything, `undefined` included. */
function errorStack(e: unknown): string {
  return e instanceof Error ? (e.stack ?? e.message) : String(e);
}

function addCounters(into: Record<string, number>, more: ConnectorCounters): Record<string, number> {
  for (const [k, n] of Object.entries(more)) into[k] = (into[k] ?? 0) + n;
  return into;
}
