import type { ExportManager } from '../src/connector/export-manager.js';
import type { MessageInput } from '../src/core/message.js';
import type { PubSubCore } from '../src/core/pubsub-core.js';
import type { SubscribeOptions, Subscriber } from '../src/core/subscriber.js';

/** The export benchmarks' workload: 1 KB JSON payloads over 10,000 ordering keys. */
export const MESSAGES = Number(process.env.BENCH_MESSAGES ?? 50_000);
export const KEYS = 10_000;

/** The DuckDB export benchmarks' target table (writeMetadata columns plus ordering_key/sequence). */
export const EVENTS_TABLE = `CREATE TABLE events(subscription_name VARCHAR, message_id VARCHAR, publish_time TIMESTAMP, data JSON,
  attributes JSON, ordering_key VARCHAR, sequence BIGINT)`;

export function payload(i: number): string {
  const base = JSON.stringify({ id: i, key: `key-${i % KEYS}`, status: 'paid', pad: '' });
  return base.replace('"pad":""', `"pad":"${'x'.repeat(1024 - base.length)}"`);
}

/**
 * 1000-message publish requests, built before any clock starts. Payloads are bytes, as a publish request
 * off the wire carries them (and as the baselines get their rows).
 */
export function publishBatches(): MessageInput[][] {
  return Array.from({ length: Math.ceil(MESSAGES / 1000) }, (_, b) =>
    Array.from({ length: Math.min(1000, MESSAGES - b * 1000) }, (_, j) => ({
      data: Buffer.from(payload(b * 1000 + j)),
      orderingKey: `key-${(b * 1000 + j) % KEYS}`,
    })),
  );
}

/** Publishes the batches with up to 4 requests in flight, as a batching client would. */
export async function publishAll(core: PubSubCore, topic: string, batches: MessageInput[][]): Promise<void> {
  const inflight: Promise<unknown>[] = [];
  for (const batch of batches) {
    inflight.push(core.publish(topic, batch));
    if (inflight.length >= 4) await inflight.shift();
  }
  await Promise.all(inflight);
}

/** Subscribes with a handler that acks; `finished` resolves once `count` messages were handled. */
export function ackAll(
  core: PubSubCore,
  subscription: string,
  count: number,
  options?: SubscribeOptions,
): { finished: Promise<void>; subscriber: Subscriber } {
  let acked = 0;
  let done!: () => void;
  const finished = new Promise<void>((resolve) => (done = resolve));
  const subscriber = core.subscribe(
    subscription,
    () => {
      if (++acked === count) done();
    },
    options,
  );
  return { finished, subscriber };
}

/**
 * Waits until the export of `subscription` holds or wrote all `messages`, then stops the exports (open files
 * are finalized, as at maxDuration or shutdown, and committed) and checks that every one was written.
 */
export async function drainExport(exports: ExportManager, subscription: string, messages: number): Promise<void> {
  const runner = exports.runner(subscription)!;
  while (runner.outstanding + runner.stats.written < messages) await new Promise((r) => setTimeout(r, 5));
  await exports.stop();
  if (runner.stats.written !== messages) throw new Error(`exported ${runner.stats.written} of ${messages}`);
}
