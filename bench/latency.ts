/**
 * Publish -> delivery latency at a steady rate (BENCH_LATENCY_RATE, default 2,000 msgs/s, for
 * BENCH_LATENCY_SECONDS, default 20, after BENCH_LATENCY_WARMUP, default 5, seconds of warm-up at the same
 * rate): 1 KB messages over 10,000 ordering keys, ordered subscription, each message its own publish call.
 * Through the library (core.publish -> core.subscribe) and through Google's client against a real
 * `orderly serve` process, and the same publisher process against a server that answers at once (Google's
 * client alone, to tell its misses from Orderly's). Every delivery is also checked per key: a first delivery must come in the key's
 * order; a duplicate, or a rewind (a key's sequence going backwards), must be preceded by a nack or a lease
 * expiry on the server (its counters, sampled over time).
 */
import { PubSub, type Message } from '@google-cloud/pubsub';
import { performance } from 'node:perf_hooks';
import { BenchChild } from './child.js';
import { PubSubCore } from '../src/core/pubsub-core.js';
import { SqliteStore } from '../src/store/sqlite-store.js';
import { tempDir } from '../test/helpers/temp-dir.js';
import { fmt, percentile, type BenchOutput, type Check } from './report.js';
import { clockMs, latencyMessage, pace, RATE, TOTAL, WARMUP } from './latency-pace.js';
import type { PublisherInput, PublisherResult } from './latency-publisher.js';
import { decomposition, messageIndex, type PublisherTrace } from './latency-trace.js';
import { FailureTimeline } from './failure-timeline.js';
import { benchModule } from './paths.js';
import { watchEventLoop } from './process-stats.js';
import { startOrderlyServe } from './serve-process.js';
import { KEYS } from './workload.js';

/** How long after the last publish every message must have been delivered. */
const DELIVERY_DEADLINE_MS = 60_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Per message: when it was published and first delivered; per key: the order deliveries came in. */
class DeliveryTracker {
  private readonly sentAt = new Float64Array(TOTAL);
  /** When the publish call resolved: the message was durable (the library) or the server answered (Google's client). */
  private readonly publishedAt = new Float64Array(TOTAL);
  private readonly firstDeliveredAt = new Float64Array(TOTAL);
  /** Per key: the ordinal of its last delivery (-1: none yet), and the next one to arrive for the first time. */
  private readonly lastOrdinal = new Int32Array(KEYS).fill(-1);
  private readonly nextFirst = new Int32Array(KEYS);
  private readonly anomalies: { i: number; at: number }[] = [];
  private delivered = 0;
  duplicates = 0;
  rewinds = 0;
  /** First deliveries that skipped or came back to a key's earlier message: never legitimate. */
  outOfOrder = 0;
  readonly publishErrors: unknown[] = [];

  sent(i: number): void {
    this.sentAt[i] = clockMs();
  }

  published(i: number): void {
    this.publishedAt[i] = clockMs();
  }

  /** The send and publish times taken by a publisher in another process (on the same clock). */
  publishedBy(publisher: PublisherResult): void {
    this.sentAt.set(publisher.sentAt);
    this.publishedAt.set(publisher.publishedAt);
    this.publishErrors.push(...publisher.errors);
  }

  /** `data` is payload(i) (message i is the (i / KEYS)th of key i % KEYS): its index is the JSON's first field. */
  received(data: Buffer): void {
    const now = clockMs();
    const i = messageIndex(data);
    const key = i % KEYS;
    const ordinal = Math.floor(i / KEYS);
    const duplicate = this.firstDeliveredAt[i] !== 0;
    const rewind = ordinal < this.lastOrdinal[key]!;
    if (duplicate) this.duplicates++;
    else {
      this.firstDeliveredAt[i] = now;
      this.delivered++;
      if (ordinal === this.nextFirst[key]) this.nextFirst[key]++;
      else this.outOfOrder++;
    }
    if (rewind) this.rewinds++;
    if (duplicate || rewind) this.anomalies.push({ i, at: now });
    this.lastOrdinal[key] = ordinal;
  }

  async allDelivered(deadlineMs: number): Promise<void> {
    const deadline = performance.now() + deadlineMs;
    while (this.delivered < TOTAL && performance.now() < deadline) await sleep(10);
  }

  get missing(): number {
    return TOTAL - this.delivered;
  }

  /** Latencies in ms of the messages after the warm-up, first deliveries only, sorted. */
  latencies(): Float64Array {
    return this.sinceSent(this.firstDeliveredAt);
  }

  /**
   * Publish call -> its promise resolved, sorted: the part of the latency spent before delivery could start
   * (the store's commit, or the round trip to the server), to tell a slow commit from a slow delivery.
   */
  publishLatencies(): Float64Array {
    return this.sinceSent(this.publishedAt);
  }

  /** The longest publish -> first delivery of the warm-up's messages: how long a cold start keeps messages waiting. */
  warmupMax(): number {
    let max = 0;
    for (let i = 0; i < WARMUP; i++) if (this.firstDeliveredAt[i]) max = Math.max(max, this.firstDeliveredAt[i]! - this.sentAt[i]!);
    return max;
  }

  /** Where each message's time went (BENCH_LATENCY_TRACE): see latency-trace.ts. */
  decomposition(trace: PublisherTrace): string {
    return decomposition(trace, this.sentAt, this.publishedAt, this.firstDeliveredAt);
  }

  private sinceSent(at: Float64Array): Float64Array {
    const out: number[] = [];
    for (let i = WARMUP; i < TOTAL; i++) if (at[i]) out.push(at[i]! - this.sentAt[i]!);
    return Float64Array.from(out).sort();
  }

  /**
   * Duplicates and rewinds with no nack or expiry anywhere on the subscription between the message's publish
   * and this delivery (widened to the samples around them). A legitimate one follows a failure of the
   * message or an earlier one of its key after the server first delivered it, so after its publish; the
   * window must not start at the key's previous delivery seen here, since a client may hold a delivery in
   * its buffers past the expiry that revokes it.
   */
  unexplained(timeline: FailureTimeline): number {
    return this.anomalies.filter((a) => timeline.atOrAfter(a.at) === timeline.atOrBefore(this.sentAt[a.i]!)).length;
  }
}

interface PathResult {
  name: string;
  rate: number;
  latencies: Float64Array;
  tracker: DeliveryTracker;
  unexplained: number;
  counters: { nacked: number; expired: number; redelivered: number };
  /** Longest event-loop blocks while publishing, ms: the publishing process's, and the subscriber's if that is another. */
  loopDelayMs: { publisher: number; subscriber?: number };
}

async function throughLibrary(): Promise<PathResult> {
  const dir = tempDir('orderly-bench-latency-');
  const core = await PubSubCore.open({ store: SqliteStore.open(dir.path) });
  try {
    await core.createTopic('latency');
    await core.createSubscription('latency', { topic: 'latency', enableMessageOrdering: true });
    const counters = () => core.metrics('latency', 0).counters;
    const timeline = new FailureTimeline(async () => counters().nacked + counters().expired, 50);
    await timeline.start();
    const tracker = new DeliveryTracker();
    const subscriber = core.subscribe('latency', (m) => tracker.received(m.message.data));
    const loop = await watchEventLoop();
    const rate = await pace((i) => {
      tracker.sent(i);
      core
        .publish('latency', [latencyMessage(i)])
        .then(() => tracker.published(i))
        .catch((e: unknown) => tracker.publishErrors.push(e));
    });
    await tracker.allDelivered(DELIVERY_DEADLINE_MS);
    const loopDelayMs = { publisher: await loop.stop() };
    await timeline.stop();
    await subscriber.close();
    const { nacked, expired, redelivered } = counters();
    const unexplained = tracker.unexplained(timeline);
    return {
      name: 'library: core.publish -> core.subscribe',
      rate,
      latencies: tracker.latencies(),
      tracker,
      unexplained,
      counters: { nacked, expired, redelivered },
      loopDelayMs,
    };
  } finally {
    await core.close();
    dir.remove();
  }
}

/** The schedule published with Google's client in a process of its own (latency-publisher.ts). */
async function publishFromOwnProcess(input: PublisherInput): Promise<PublisherResult> {
  const publisher = BenchChild.start<PublisherResult>(benchModule('latency-publisher'), [JSON.stringify(input)]);
  try {
    return await publisher.next();
  } finally {
    await publisher.stop();
  }
}

interface ClientAloneResult {
  rate: number;
  /** Publish call -> resolved after the warm-up, sorted. */
  latencies: Float64Array;
  errors: number;
  maxLoopDelayMs: number;
}

/**
 * The same publisher process against a server that answers every Publish at once (noop-publish-server.ts):
 * what Google's client alone manages in this run. Its own process and the cold start are the same as the
 * row through `orderly serve`; only Orderly's part is gone.
 */
async function googleClientAlone(): Promise<ClientAloneResult> {
  const server = BenchChild.start<number>(benchModule('noop-publish-server'), []);
  try {
    const port = await server.next();
    const published = await publishFromOwnProcess({ apiEndpoint: `127.0.0.1:${port}`, projectId: 'orderly-bench', topic: 'latency' });
    const tracker = new DeliveryTracker();
    tracker.publishedBy(published);
    return {
      rate: published.rate,
      latencies: tracker.publishLatencies(),
      errors: published.errors.length,
      maxLoopDelayMs: published.maxLoopDelayMs,
    };
  } finally {
    await server.stop();
  }
}

/**
 * Google's client against a real `orderly serve`: the subscriber in this process; the publisher in a process
 * of its own (`ownProcess`, as a publishing service would be), or in this one beside the subscriber.
 */
async function throughGoogleClient(ownProcess: boolean): Promise<PathResult> {
  const server = await startOrderlyServe();
  try {
    process.env.METADATA_SERVER_DETECTION = 'none';
    const pubsub = new PubSub({ projectId: server.projectId, apiEndpoint: server.host, emulatorMode: true });
    const [topic] = await pubsub.createTopic('latency');
    const [subscription] = await topic.createSubscription('latency', { enableMessageOrdering: true });
    // The client's default batching (up to 100 messages or 10 ms) and flow control: what a user gets.
    topic.setPublishOptions({ messageOrdering: true });
    const timeline = new FailureTimeline(async () => {
      const c = await server.counters('latency');
      return c.nacked + c.expired;
    }, 100);
    await timeline.start();
    const tracker = new DeliveryTracker();
    const subscriberErrors: unknown[] = [];
    subscription.on('error', (e: unknown) => subscriberErrors.push(e));
    subscription.on('message', (m: Message) => {
      tracker.received(m.data);
      m.ack();
    });
    let rate: number;
    const loop = await watchEventLoop();
    let publisherLoopDelayMs: number | undefined;
    let trace: PublisherTrace | undefined;
    if (ownProcess) {
      const published = await publishFromOwnProcess({ apiEndpoint: server.host, projectId: server.projectId, topic: 'latency' });
      tracker.publishedBy(published);
      trace = published.trace;
      rate = published.rate;
      publisherLoopDelayMs = published.maxLoopDelayMs;
    } else {
      rate = await pace((i) => {
        tracker.sent(i);
        topic
          .publishMessage(latencyMessage(i))
          .then(() => tracker.published(i))
          .catch((e: unknown) => tracker.publishErrors.push(e));
      });
    }
    await tracker.allDelivered(DELIVERY_DEADLINE_MS);
    if (trace) console.error(`latency: where Google's client's time went, per second of send time\n\n${tracker.decomposition(trace)}\n`);
    const thisLoop = await loop.stop();
    const loopDelayMs =
      publisherLoopDelayMs === undefined ? { publisher: thisLoop } : { publisher: publisherLoopDelayMs, subscriber: thisLoop };
    await timeline.stop();
    await subscription.close();
    await pubsub.close();
    if (subscriberErrors.length) throw new Error(`subscriber errors: ${String(subscriberErrors[0])}`);
    const { nacked, expired, redelivered } = await server.counters('latency');
    const unexplained = tracker.unexplained(timeline);
    return {
      name: ownProcess
        ? "Google's client via `orderly serve`"
        : "Google's client via `orderly serve`, publisher in the subscriber's process",
      rate,
      latencies: tracker.latencies(),
      tracker,
      unexplained,
      counters: { nacked, expired, redelivered },
      loopDelayMs,
    };
  } finally {
    await server.stop();
  }
}

export async function benchLatency(): Promise<BenchOutput> {
  // The one-process arrangement has no latency target: it measures how busy Google's client keeps the
  // process (see docs/benchmarks.md); its order and duplicate checks still apply.
  const library = await throughLibrary();
  const ownProcess = await throughGoogleClient(true);
  const alone = await googleClientAlone();
  const paths: [PathResult, number | undefined][] = [
    [library, 20],
    [ownProcess, 100],
    [await throughGoogleClient(false), undefined],
  ];
  const checks: Check[] = [];
  const rows = paths.map(([r, p99Target]) => {
    const p99 = percentile(r.latencies, 99);
    const t = r.tracker;
    if (p99Target !== undefined) checks.push({ target: `${r.name}: p99 ≤ ${p99Target} ms`, measured: fmt.ms(p99), pass: p99 <= p99Target });
    checks.push({
      target: `${r.name}: every message delivered, publishes succeeded`,
      measured: `${fmt.int(t.missing)} missing, ${t.publishErrors.length} publish errors`,
      pass: t.missing === 0 && t.publishErrors.length === 0,
    });
    checks.push({
      target: `${r.name}: first deliveries in per-key order`,
      measured: `${fmt.int(t.outOfOrder)} out of order`,
      pass: t.outOfOrder === 0,
    });
    checks.push({
      target: `${r.name}: no duplicate or rewind without a preceding nack or lease expiry`,
      measured: `${r.unexplained} of ${t.duplicates + t.rewinds}`,
      pass: r.unexplained === 0,
    });
    return [
      r.name,
      fmt.int(r.rate),
      fmt.ms(percentile(r.latencies, 50)),
      fmt.ms(p99),
      fmt.ms(r.latencies[r.latencies.length - 1] ?? NaN),
      fmt.ms(percentile(r.tracker.publishLatencies(), 99)),
      fmt.ms(t.warmupMax()),
      `${fmt.int(t.duplicates)} / ${fmt.int(t.rewinds)} / ${fmt.int(t.outOfOrder)}`,
      fmt.int(r.unexplained),
      `${r.counters.nacked} / ${r.counters.expired} / ${r.counters.redelivered}`,
      r.loopDelayMs.subscriber === undefined
        ? fmt.ms(r.loopDelayMs.publisher)
        : `${fmt.ms(r.loopDelayMs.publisher)} / ${fmt.ms(r.loopDelayMs.subscriber)}`,
    ];
  });
  checks.push({
    target: "Google's client to a server that answers at once: publishes succeeded",
    measured: `${alone.errors} publish errors`,
    pass: alone.errors === 0,
  });
  return {
    tables: [
      {
        title: `${fmt.int(TOTAL - WARMUP)} messages measured (after ${fmt.int(WARMUP)} of warm-up) at ${fmt.int(RATE)} msgs/s`,
        header: [
          'path',
          'msgs/s',
          'p50',
          'p99',
          'max',
          'p99 publish call -> resolved',
          'max during the warm-up',
          'duplicates / rewinds / first out of order',
          'without a preceding nack/expiry',
          'server nacked / expired / redelivered',
          'longest event-loop block of the client (publisher / subscriber)',
        ],
        numeric: [1, 2, 3, 4, 5, 6, 8],
        rows,
      },
      {
        title:
          "Google's client alone: the same publisher process against a gRPC server that answers every Publish at once (no store, no delivery)",
        header: ['msgs/s', 'p50 publish call -> resolved', 'p99', 'max', 'longest event-loop block of the publisher'],
        numeric: [0, 1, 2, 3, 4],
        rows: [
          [
            fmt.int(alone.rate),
            fmt.ms(percentile(alone.latencies, 50)),
            fmt.ms(percentile(alone.latencies, 99)),
            fmt.ms(alone.latencies[alone.latencies.length - 1] ?? NaN),
            fmt.ms(alone.maxLoopDelayMs),
          ],
        ],
      },
    ],
    checks,
  };
}
