/**
 * BENCH_LATENCY_TRACE=1: where Google's client's publish -> delivery time goes, per second of send time.
 * The publisher process marks when each message's batch became a Publish RPC (Google's client's
 * `MessageQueue._publish`, the call an ordered key's queue makes once its previous batch is answered) and
 * samples its RPCs in flight and its event loop's utilization; the benchmark prints, per second:
 * publish call -> RPC started (waiting behind the key's previous publish), RPC started -> resolved (the
 * client's gRPC stack, the wire, the server's commit and answer), resolved -> delivered.
 */
import { createRequire } from 'node:module';
import { performance } from 'node:perf_hooks';
import { clockMs, RATE, TOTAL, WARMUP } from './latency-pace.js';
import { percentile } from './report.js';

export const TRACING = Boolean(process.env.BENCH_LATENCY_TRACE);

const SAMPLE_MS = 250;

export interface PublisherTrace {
  /** Per message: when its batch's Publish RPC started (0: never). */
  rpcAt: number[];
  /** Every SAMPLE_MS from the start: the RPCs in flight and the event loop's utilization (%) since the last sample. */
  samples: { inFlight: number; loopPercent: number }[];
}

interface QueueModule {
  MessageQueue: { prototype: { _publish: (this: unknown, messages: { data: Buffer }[], ...rest: unknown[]) => Promise<void> } };
}

/** Starts tracing Google's client in this (the publisher's) process; `stop()` returns what was seen. */
export function tracePublisher(): { stop(): PublisherTrace } {
  const rpcAt = new Float64Array(TOTAL);
  const samples: PublisherTrace['samples'] = [];
  let inFlight = 0;
  // The client's own module instance (it has no `exports` map): the one its Topic publishes through.
  const queues = createRequire(import.meta.url)('@google-cloud/pubsub/build/src/publisher/message-queues.js') as QueueModule;
  const proto = queues.MessageQueue.prototype;
  const publish = proto._publish;
  proto._publish = async function (this: unknown, messages, ...rest) {
    const now = clockMs();
    for (const m of messages) {
      const i = messageIndex(m.data);
      if (i >= 0 && i < TOTAL && !rpcAt[i]) rpcAt[i] = now;
    }
    inFlight++;
    try {
      return await publish.call(this, messages, ...rest);
    } finally {
      inFlight--;
    }
  };
  let last = performance.eventLoopUtilization();
  const timer = setInterval(() => {
    const now = performance.eventLoopUtilization();
    samples.push({ inFlight, loopPercent: Math.round(performance.eventLoopUtilization(now, last).utilization * 100) });
    last = now;
  }, SAMPLE_MS);
  return {
    stop() {
      clearInterval(timer);
      proto._publish = publish;
      return { rpcAt: Array.from(rpcAt), samples };
    },
  };
}

/** Message i's payload is JSON starting `{"id":i,`. */
export function messageIndex(data: Buffer): number {
  return parseInt(data.toString('latin1', 6, 20), 10);
}

/**
 * The decomposition, one line per second of send time (p50/p99 of each part, ms), then the measured
 * messages' (after the warm-up) as a whole. `sentAt`, `publishedAt`, `deliveredAt` per message, on the shared clock.
 */
export function decomposition(trace: PublisherTrace, sentAt: Float64Array, publishedAt: Float64Array, deliveredAt: Float64Array): string {
  const parts: [string, (i: number) => number][] = [
    ['call -> RPC', (i) => trace.rpcAt[i]! - sentAt[i]!],
    ['RPC -> resolved', (i) => publishedAt[i]! - trace.rpcAt[i]!],
    ['resolved -> delivered', (i) => deliveredAt[i]! - publishedAt[i]!],
    ['total', (i) => deliveredAt[i]! - sentAt[i]!],
  ];
  const complete = (i: number) => trace.rpcAt[i]! > 0 && publishedAt[i]! > 0 && deliveredAt[i]! > 0;
  const cell = (messages: number[], part: (i: number) => number) => {
    const values = messages
      .map(part)
      .filter(Number.isFinite)
      .sort((a, b) => a - b);
    return `${percentile(values, 50).toFixed(0)} / ${percentile(values, 99).toFixed(0)}`;
  };
  const perSecond = Math.round(1000 / SAMPLE_MS);
  const lines = [
    `| s | ${parts.map(([name]) => `${name} p50 / p99`).join(' | ')} | publisher's RPCs in flight | publisher's event loop busy |`,
    `|---:|${parts.map(() => '---:|').join('')}---:|---:|`,
  ];
  // Each complete message in the second of send time it belongs to, in one pass.
  const start = sentAt[0]!;
  const bySecond: number[][] = Array.from({ length: Math.ceil(TOTAL / RATE) }, () => []);
  for (let i = 0; i < TOTAL; i++) if (complete(i)) bySecond[Math.floor((sentAt[i]! - start) / 1000)]?.push(i);
  for (const [second, messages] of bySecond.entries()) {
    const samples = trace.samples.slice(second * perSecond, (second + 1) * perSecond);
    lines.push(
      `| ${second} | ${parts.map(([, part]) => cell(messages, part)).join(' | ')} | ${samples.map((s) => s.inFlight).join(', ')} | ${samples.map((s) => `${s.loopPercent}%`).join(', ')} |`,
    );
  }
  const measured: number[] = [];
  for (let i = WARMUP; i < TOTAL; i++) if (complete(i)) measured.push(i);
  lines.push('', `measured messages (p50 / p99, ms): ${parts.map(([name, part]) => `${name} ${cell(measured, part)}`).join('; ')}`);
  return lines.join('\n');
}
