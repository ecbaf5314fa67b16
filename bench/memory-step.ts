/**
 * One step of the memory benchmark (bench/memory.ts), run in a fresh process so that its peak RSS (VmHWM)
 * and event-loop delay belong to this step alone. Args: the step's name and its input as JSON; replies
 * with a StepResult. Each step imports only what its path needs (DuckDB, the AWS SDK and gRPC are loaded
 * by the steps that use them), as a process doing only that would.
 */
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { ConnectorSettings } from '../src/connector/connector.js';
import { PubSubCore } from '../src/core/pubsub-core.js';
import { SqliteStore } from '../src/store/sqlite-store.js';
import type { ProbeMessage } from './ack-probe.js';
import { benchModule } from './paths.js';
import { BenchChild, exitWithParent, reply, runChild } from './child.js';
import { peakRssBytes, watchEventLoop } from './process-stats.js';
import { time } from './report.js';
import { EVENTS_TABLE, KEYS, payload } from './workload.js';
import { DEFAULT_HEAP_GROWTH_PERCENT, limitHeapGrowth, SERVING_HEAP_GROWTH_PERCENT } from '../src/job/heap-growth.js';

export type StepName = 'publish' | 'open' | 'callback' | 'streaming-pull' | 'duckdb' | 'text' | 'parquet' | 'keys';

export interface StepInput {
  /** The data directory (for drains: a copy of the published backlog's). */
  dir: string;
  backlog: number;
  shrinkWaitSeconds: number;
}

export interface StepResult {
  /** VmHWM at the end of the measured work, in bytes. */
  peakRss: number;
  maxLoopDelayMs: number;
  /** The measured work: publishing, opening, or draining (after the open). */
  seconds: number;
  /** Drains: opening the store with the backlog, before the drain. */
  openSeconds?: number;
  /** publish: the store's files at full backlog (after close). */
  storeBytes?: number;
  /** callback: first ack durable (seen by another connection) minus first handler completed. */
  firstAckDelayMs?: number;
  /** callback: messages durably acked when the last handler completed. */
  ackedAtLastHandler?: number;
  /** callback: the store's files right after the drain, and after the shrink wait. */
  drainedStoreBytes?: number;
  waitedStoreBytes?: number;
  /** callback: seconds after the drain until the files were at most half their drained size (undefined: never). */
  shrankAfterSeconds?: number;
  waitMaxLoopDelayMs?: number;
  /** keys: heap + external memory retained per ordering key (payloads excluded); of it the JS heap; RSS growth per key. */
  bytesPerKey?: number;
  heapPerKey?: number;
  rssPerKey?: number;
}

// As a process exporting or inspecting does with `memory.heapGrowthPercent` unset (HeapGrowth; the setting does not pass to a child).
limitHeapGrowth(DEFAULT_HEAP_GROWTH_PERCENT);

const TOPIC = 'backlog';
const SUBSCRIPTION = 'backlog';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The store's files (database, WAL, shared memory) in bytes. */
function storeBytes(dir: string): number {
  return readdirSync(dir)
    .filter((f) => f.startsWith('orderly.sqlite'))
    .reduce((sum, f) => sum + statSync(join(dir, f)).size, 0);
}

/**
 * Publishes `count` messages in 1000-message requests, 4 in flight; batches are built as they go (not held),
 * each in a turn of the event loop of its own, as requests off the wire arrive: when several commits
 * resolve in one turn, building their next batches back to back (~1 MB of payloads each) held the loop
 * 20–30 ms — the benchmark's own blocking, which the step's loop delay is not about.
 */
async function publishBacklog(core: PubSubCore, count: number, key: (i: number) => string, data: (i: number) => Buffer): Promise<void> {
  const inflight: Promise<unknown>[] = [];
  for (let b = 0; b < count; b += 1000) {
    await new Promise((resolve) => setImmediate(resolve));
    const batch = Array.from({ length: Math.min(1000, count - b) }, (_, j) => ({ data: data(b + j), orderingKey: key(b + j) }));
    inflight.push(core.publish(TOPIC, batch));
    if (inflight.length >= 4) await inflight.shift();
  }
  await Promise.all(inflight);
  await core.flushed();
}

/** Default settings throughout: what a user gets. */
async function openCore(dir: string): Promise<{ core: PubSubCore; openSeconds: number }> {
  let core!: PubSubCore;
  const openSeconds = await time(async () => {
    core = await PubSubCore.open({ store: SqliteStore.open(dir) });
  });
  return { core, openSeconds };
}

async function createBacklogSubscription(dir: string): Promise<PubSubCore> {
  const core = await PubSubCore.open({ store: SqliteStore.open(dir) });
  await core.createTopic(TOPIC);
  await core.createSubscription(SUBSCRIPTION, { topic: TOPIC, enableMessageOrdering: true });
  return core;
}

async function publish({ dir, backlog }: StepInput): Promise<StepResult> {
  const core = await createBacklogSubscription(dir);
  const loop = await watchEventLoop();
  const seconds = await time(() =>
    publishBacklog(
      core,
      backlog,
      (i) => `key-${i % KEYS}`,
      (i) => Buffer.from(payload(i)),
    ),
  );
  const maxLoopDelayMs = await loop.stop();
  const peakRss = peakRssBytes();
  await core.close();
  return { peakRss, maxLoopDelayMs, seconds, storeBytes: storeBytes(dir) };
}

async function open({ dir }: StepInput): Promise<StepResult> {
  const loop = await watchEventLoop();
  const { core, openSeconds } = await openCore(dir);
  const maxLoopDelayMs = await loop.stop();
  const peakRss = peakRssBytes();
  await core.close();
  return { peakRss, maxLoopDelayMs, seconds: openSeconds };
}

/**
 * Drains through core.subscribe (default flow control, each message acked by returning). A separate
 * process reads the store file to see when the first ack became durable; after the drain the core stays
 * open for the shrink wait, so its background compaction can return the disk.
 */
async function callback({ dir, backlog, shrinkWaitSeconds }: StepInput): Promise<StepResult> {
  const { core, openSeconds } = await openCore(dir);
  const probe = BenchChild.start<ProbeMessage>(benchModule('ack-probe'), [
    join(dir, 'orderly.sqlite'),
    core.subscriptionName(SUBSCRIPTION),
  ]);
  const probed: Partial<{ firstAckAt: number; count: number }> = {};
  const untilProbed = async (field: 'firstAckAt' | 'count') => {
    while (probed[field] === undefined) Object.assign(probed, await probe.next());
    return probed[field];
  };
  await probe.next(); // ready
  const loop = await watchEventLoop();
  let handled = 0;
  let firstHandledAt = 0;
  let allHandled!: () => void;
  const finished = new Promise<void>((resolve) => (allHandled = resolve));
  const subscriber = core.subscribe(SUBSCRIPTION, () => {
    if (++handled === 1) firstHandledAt = Date.now();
    if (handled === backlog) allHandled();
  });
  const seconds = await time(async () => {
    await finished;
    probe.send('count');
    await subscriber.close();
    await core.flushed();
  });
  const maxLoopDelayMs = await loop.stop();
  const peakRss = peakRssBytes();
  const ackedAtLastHandler = await untilProbed('count');
  const firstAckDelayMs = (await untilProbed('firstAckAt')) - firstHandledAt;
  probe.send('stop');
  await probe.exited;

  const drainedStoreBytes = storeBytes(dir);
  const waitLoop = await watchEventLoop();
  let shrankAfterSeconds: number | undefined;
  for (let s = 1; s <= shrinkWaitSeconds; s++) {
    await sleep(1000);
    if (shrankAfterSeconds === undefined && storeBytes(dir) <= drainedStoreBytes / 2) shrankAfterSeconds = s;
  }
  const waitMaxLoopDelayMs = await waitLoop.stop();
  const waitedStoreBytes = storeBytes(dir);
  await core.close();
  return {
    peakRss,
    maxLoopDelayMs,
    seconds,
    openSeconds,
    firstAckDelayMs,
    ackedAtLastHandler,
    drainedStoreBytes,
    waitedStoreBytes,
    shrankAfterSeconds,
    waitMaxLoopDelayMs,
  };
}

/** Drains through the gRPC endpoint `orderly serve` runs, from a lean client in another process. */
async function streamingPull({ dir, backlog }: StepInput): Promise<StepResult> {
  // As `orderly serve` runs a job that exports nothing (HeapGrowth).
  limitHeapGrowth(SERVING_HEAP_GROWTH_PERCENT);
  const { startPubsubEndpoint } = await import('../src/api/endpoint.js');
  const { core, openSeconds } = await openCore(dir);
  const endpoint = await startPubsubEndpoint(core, { host: '127.0.0.1', port: 0 });
  const loop = await watchEventLoop();
  const seconds = await time(async () => {
    const args = [`127.0.0.1:${endpoint.port}`, core.projectId, SUBSCRIPTION, String(backlog)];
    await runChild<{ deliveries: number }>(benchModule('grpc-drain'), args);
    // The client sent every ack on the stream before ending it; done once the core has them, durably.
    while (core.metrics(SUBSCRIPTION, 0).backlogMessages > 0) await sleep(20);
    await core.flushed();
  });
  const maxLoopDelayMs = await loop.stop();
  const peakRss = peakRssBytes();
  await endpoint.close();
  await core.close();
  return { peakRss, maxLoopDelayMs, seconds, openSeconds };
}

/** Drains through an export runner: DuckDB table, or text / Parquet objects on s3rver (its own process). */
async function exportDrain(kind: 'duckdb' | 'text' | 'parquet', { dir, backlog }: StepInput): Promise<StepResult> {
  const [{ registerBuiltInConnectors }, { jobExports }] = await Promise.all([import('../connectors/index.js'), import('./job-exports.js')]);
  registerBuiltInConnectors();
  const { core, openSeconds } = await openCore(dir);
  const cleanups: (() => Promise<void>)[] = [];
  let settings: ConnectorSettings;
  let exportConfig: Record<string, unknown>;
  if (kind === 'duckdb') {
    const { closeDuckDb, connectDuckDb } = await import('../src/duckdb/database.js');
    const duckdbPath = join(dir, 'export.duckdb');
    const connection = await connectDuckDb(duckdbPath);
    await connection.run(EVENTS_TABLE);
    connection.closeSync();
    cleanups.push(() => closeDuckDb(duckdbPath));
    settings = { dataDir: dir, duckdbPath };
    exportConfig = { bigqueryConfig: { table: 'bench.main.events', writeMetadata: true } };
  } else {
    const { startBenchS3 } = await import('./s3-endpoint.js');
    const s3 = await startBenchS3();
    cleanups.push(() => s3.close());
    settings = { dataDir: dir, objectStorage: s3.settings };
    const format = kind === 'text' ? { textConfig: {} } : { parquetConfig: { writeMetadata: true } };
    exportConfig = { cloudStorageConfig: { bucket: await s3.bucket(), ...format } };
  }
  await core.updateSubscription(SUBSCRIPTION, exportConfig);
  const exports = jobExports(core, settings);
  // As `orderly run` does: the connector's code is loaded before the export starts (its compile is start-up).
  await exports.load();
  const loop = await watchEventLoop();
  let written = 0;
  const seconds = await time(async () => {
    await exports.sync();
    const runner = exports.runner(SUBSCRIPTION)!;
    while (runner.outstanding + runner.stats.written < backlog) await sleep(20);
    // Finalize what a buffering sink holds (as at maxDuration or shutdown) and wait for its commit.
    await exports.stop();
    written = runner.stats.written;
    await core.flushed();
  });
  const maxLoopDelayMs = await loop.stop();
  const peakRss = peakRssBytes();
  if (written !== backlog) throw new Error(`${kind}: exported ${written} of ${backlog}`);
  await core.close();
  for (const cleanup of cleanups.reverse()) await cleanup();
  return { peakRss, maxLoopDelayMs, seconds, openSeconds };
}

/**
 * Memory per ordering key: `backlog` messages of tiny payloads, each its own key, published to an ordered
 * subscription without a consumer; what the heap and native allocations (external) keep after a full GC,
 * less the payload bytes held, divided by the keys.
 */
async function keys({ dir, backlog }: StepInput): Promise<StepResult> {
  const gc = globalThis.gc;
  if (!gc) throw new Error('the keys step needs --expose-gc');
  const retained = () => {
    gc();
    const m = process.memoryUsage();
    return { heap: m.heapUsed, native: m.external, rss: m.rss };
  };
  const core = await createBacklogSubscription(dir);
  const before = retained();
  const loop = await watchEventLoop();
  const tiny = Buffer.from('k');
  const seconds = await time(() =>
    publishBacklog(
      core,
      backlog,
      (i) => `key-${i}`,
      () => tiny,
    ),
  );
  const maxLoopDelayMs = await loop.stop();
  const after = retained();
  const peakRss = peakRssBytes();
  const resident = core.metrics(SUBSCRIPTION, 0).residentBytes;
  await core.close();
  const perKey = (field: 'heap' | 'native' | 'rss') => (after[field] - before[field]) / backlog;
  return {
    peakRss,
    maxLoopDelayMs,
    seconds,
    bytesPerKey: perKey('heap') + perKey('native') - resident / backlog,
    heapPerKey: perKey('heap'),
    rssPerKey: perKey('rss'),
  };
}

const steps: Record<StepName, (input: StepInput) => Promise<StepResult>> = {
  publish,
  open,
  callback,
  'streaming-pull': streamingPull,
  duckdb: (input) => exportDrain('duckdb', input),
  text: (input) => exportDrain('text', input),
  parquet: (input) => exportDrain('parquet', input),
  keys,
};

exitWithParent();
const [name, input] = process.argv.slice(2);
const step = steps[name as StepName];
if (!step) throw new Error(`unknown memory step ${JSON.stringify(name)}`);
await reply(await step(JSON.parse(input!) as StepInput));
// Whatever a library left scheduled (an idle socket's timer) must not keep the step's process alive.
process.exit(0);
