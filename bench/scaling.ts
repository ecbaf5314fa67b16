/**
 * Worker fleets: 1, 2 and 3 `orderly run` workers (separate processes) exporting the same backlog of one
 * remote subscription, read from an `orderly serve` endpoint (another process) through Google's client, to
 * text objects on S3 (s3rver in its own process, or MinIO: see s3-endpoint.ts); then one worker per format
 * (text, Avro and Parquet with metadata) for what one worker sustains in MB/s. Baseline: the embedded core
 * exporting the same backlog to text objects in one process, in the same run.
 *
 * Each run has its own subscription (retaining acked messages) holding the whole backlog, hidden by a seek
 * to the present until its workers are up; the clock starts with the seek back to before the backlog and
 * stops once every message is acked (the workers are stopped, finalizing their open files, as soon as
 * every unacked message is in their hands; a message that was on its way to a stopping worker comes again,
 * and one more worker exports it, on the clock).
 *
 * The workers finalize what they hold after IDLE_FLUSH_SECONDS without a delivery, not the default 2 s
 * (remote.idleFlushSeconds). With ordering, the endpoint sends a key's next messages only once its earlier
 * ones are acked; in some runs the last messages of the backlog are those of a key whose earlier ones sit
 * in a worker's open file, which no more messages can fill. They never reach the workers' hands until that
 * file is finalized, so the stop above cannot come first: such a run waited out the idle time (checked then
 * at the 1 s flush interval: 2-3 s) and ran at ~7.1k msgs/s instead of ~16k (2 of 9 one-worker runs).
 */
import { PubSub } from '@google-cloud/pubsub';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { registerBuiltInConnectors } from '../connectors/index.js';
import { readFleetManifest } from '../connectors/object-storage/bucket-manifest.js';
import { manifestView } from '../connectors/object-storage/manifest-view.js';
import { createS3Client, s3Connection } from '../connectors/object-storage/s3-client.js';
import { ExportManager } from '../src/connector/export-manager.js';
import { remoteIdentity } from '../src/connector/sources/remote-names.js';
import { PubSubCore } from '../src/core/pubsub-core.js';
import { createLogger } from '../src/log.js';
import { SqliteStore } from '../src/store/sqlite-store.js';
import { tempDir } from '../test/helpers/temp-dir.js';
import { orderlyBin, orderlyNode } from './paths.js';
import { ratioTable, time, type BenchOutput, type BenchResult } from './report.js';
import { startBenchS3, type BenchS3 } from './s3-endpoint.js';
import { drainExport, payload } from './workload.js';

const MESSAGES = Math.min(Number(process.env.BENCH_MESSAGES ?? 50_000), 30_000);
const KEYS = 1_000;
const PROJECT = 'bench-project';
/** Each worker's share: the most messages it holds unacked (files roll at a quarter of it). */
const WORKER_BUDGET = 4_000;
/** remote.idleFlushSeconds of the workers: see the top of this file. */
const IDLE_FLUSH_SECONDS = 0.25;
const payloadBytes = Buffer.byteLength(payload(0));

type Format = Record<string, unknown>;
const TEXT: Format = { textConfig: {} };

interface Remote {
  host: string;
  admin: PubSub;
  backlog(subscription: string): Promise<number>;
  close(): Promise<void>;
}

async function startRemote(dir: string): Promise<Remote> {
  const config = join(dir, 'serve.yaml');
  writeFileSync(config, stringify({ projectId: PROJECT, dataDir: join(dir, 'serve'), durability: 'process', metrics: { port: 0 } }));
  const child = spawn(process.execPath, [...orderlyNode.flags, orderlyBin, 'serve', '--port', '0', '--config', config], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const host = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (c) => {
      out += c;
      const m = /PUBSUB_EMULATOR_HOST=(\S+)\)/.exec(out);
      if (m) resolve(m[1]!);
    });
    child.once('exit', (code) => reject(new Error(`orderly serve exited (${code})`)));
  });
  const admin = new PubSub({ projectId: PROJECT, apiEndpoint: host, emulatorMode: true });
  const { metrics } = JSON.parse(readFileSync(join(dir, 'serve', 'orderly.lock'), 'utf8')) as { metrics: string };
  return {
    host,
    admin,
    async backlog(subscription) {
      const rows = (await (await fetch(`${metrics}/status`)).json()) as { subscription: string; backlog: number }[];
      return rows.find((r) => r.subscription.endsWith(`/subscriptions/${subscription}`))!.backlog;
    },
    async close() {
      await admin.close();
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    },
  };
}

/** An `orderly run` worker: resolves its metrics URL once it runs. */
function startWorker(job: string): { child: ChildProcess; metrics: Promise<string>; exited: Promise<number | null> } {
  const child = spawn(process.execPath, [...orderlyNode.flags, orderlyBin, 'run', job], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, ORDERLY_LOG_LEVEL: 'info' },
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const metrics = new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (c) => {
      out += c;
      const m = /"metrics":"([^"]+)".*"msg":"job running"/.exec(out);
      if (m) resolve(m[1]!);
    });
    void exited.then((code) => reject(new Error(`orderly run exited (${code}) before it ran`)));
  });
  return { child, metrics, exited };
}

async function heldBy(metrics: string): Promise<number> {
  const rows = (await (await fetch(`${metrics}/status`)).json()) as { worker?: string; backlog: number }[];
  return rows.filter((r) => r.worker).reduce((n, r) => n + r.backlog, 0);
}

/** The backlog, on a subscription that retains acked messages, so a seek shows or hides it. */
async function prepareBacklog(remote: Remote, subscriptions: string[]): Promise<Date> {
  const [topic] = await remote.admin.createTopic('scale');
  for (const s of subscriptions) await topic.createSubscription(s, { enableMessageOrdering: true, retainAckedMessages: true });
  const before = new Date(Date.now() - 1000);
  const publisher = remote.admin.topic('scale', { messageOrdering: true, batching: { maxMessages: 1000, maxMilliseconds: 5 } });
  for (let start = 0; start < MESSAGES; start += 5000) {
    const sends: Promise<string>[] = [];
    for (let i = start; i < Math.min(MESSAGES, start + 5000); i++)
      sends.push(publisher.publishMessage({ data: Buffer.from(payload(i)), orderingKey: `key-${i % KEYS}` }));
    await Promise.all(sends);
  }
  // Hidden (acked) until each run seeks back.
  const after = new Date(Date.now() + 1000);
  for (const s of subscriptions) await remote.admin.subscription(s).seek(after);
  return before;
}

/** `workers` workers export the subscription's backlog to `format` objects; msgs/s from the seek to the last ack. */
async function fleetRun(
  dir: string,
  remote: Remote,
  s3: BenchS3,
  subscription: string,
  from: Date,
  workers: number,
  format: Format,
): Promise<{ rate: number; restarts: number }> {
  const bucket = await s3.bucket();
  const job = join(dir, `${subscription}.yaml`);
  writeFileSync(
    job,
    stringify({
      projectId: PROJECT,
      dataDir: join(dir, subscription),
      metrics: { port: 0 },
      objectStorage: s3.settings,
      remote: {
        endpoint: remote.host,
        flowControl: { maxMessages: WORKER_BUDGET },
        idleFlushSeconds: IDLE_FLUSH_SECONDS,
        exports: [
          {
            subscription,
            enableMessageOrdering: true,
            cloudStorageConfig: { bucket, filenameDatetimeFormat: 'YYYY-MM-DDThh:mm:ssZ', ...format },
          },
        ],
      },
    }),
  );
  let fleet = Array.from({ length: workers }, () => startWorker(job));
  let metrics = await Promise.all(fleet.map((w) => w.metrics));
  let restarts = 0;
  const seconds = await time(async () => {
    await remote.admin.subscription(subscription).seek(from);
    for (;;) {
      await untilHeld(remote, subscription, metrics);
      // Stopping finalizes and acks what the workers hold.
      for (const w of fleet) w.child.kill('SIGTERM');
      await Promise.all(fleet.map((w) => w.exited));
      if ((await remote.backlog(subscription)) === 0) return;
      // Messages the endpoint sent while the workers stopped were nacked by them (or their leases lapse):
      // they come again, so one more worker takes them, on the clock.
      restarts++;
      fleet = [startWorker(job)];
      metrics = await Promise.all(fleet.map((w) => w.metrics));
    }
  });
  const client = createS3Client(s3Connection(s3.settings));
  const name = `projects/${PROJECT}/subscriptions/${subscription}`;
  const view = manifestView(await readFleetManifest(client, bucket, { name, uid: remoteIdentity(name).uid }));
  client.destroy();
  if (view.messages !== MESSAGES) throw new Error(`${subscription}: the manifest view holds ${view.messages} of ${MESSAGES} messages`);
  return { rate: MESSAGES / seconds, restarts };
}

/** How long the backlog and the workers' holdings may stand still before the run counts as stuck (beyond any lease). */
const STUCK_MS = 60_000;

/**
 * Waits until every unacked message is in the workers' hands (or none is left). The backlog is read before
 * and after the workers' holdings: unchanged, nothing was acked meanwhile, so holdings equal to it leave no
 * message on its way to a worker. (Still, a stopping worker nacks what reaches it late: the caller checks.)
 */
async function untilHeld(remote: Remote, subscription: string, metrics: string[]): Promise<void> {
  let last = '';
  let since = Date.now();
  for (;;) {
    const before = await remote.backlog(subscription);
    const held = (await Promise.all(metrics.map(heldBy))).reduce((a, b) => a + b, 0);
    const backlog = await remote.backlog(subscription);
    if (backlog === 0 || (backlog === before && backlog === held && held < MESSAGES)) return;
    const seen = `${backlog}/${held}`;
    if (seen !== last) [last, since] = [seen, Date.now()];
    else if (Date.now() - since > STUCK_MS)
      throw new Error(`${subscription}: backlog ${backlog}, workers hold ${held}, unchanged for ${STUCK_MS / 1000} s`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Baseline: the embedded core exports the same backlog to text objects, in one process. */
async function embedded(s3: BenchS3): Promise<number> {
  registerBuiltInConnectors();
  const dir = tempDir('orderly-bench-');
  const bucket = await s3.bucket();
  const core = await PubSubCore.open({ store: SqliteStore.open(join(dir.path, 'store')), tickMs: 50 });
  const exports = new ExportManager({
    core,
    settings: { dataDir: dir.path, objectStorage: s3.settings },
    logger: createLogger({ level: 'warn' }),
    runner: { maxOutstandingMessages: WORKER_BUDGET },
  });
  try {
    await core.createTopic('scale');
    await core.createSubscription('to-s3', { topic: 'scale', enableMessageOrdering: true, cloudStorageConfig: { bucket, ...TEXT } });
    for (let start = 0; start < MESSAGES; start += 1000) {
      await core.publish(
        'scale',
        Array.from({ length: Math.min(1000, MESSAGES - start) }, (_, j) => ({
          data: Buffer.from(payload(start + j)),
          orderingKey: `key-${(start + j) % KEYS}`,
        })),
      );
    }
    const seconds = await time(async () => {
      await exports.start();
      await drainExport(exports, 'to-s3', MESSAGES);
    });
    return MESSAGES / seconds;
  } finally {
    await exports.stop();
    await core.close();
    dir.remove();
  }
}

const mbps = (perSecond: number) => `${((perSecond * payloadBytes) / 1024 / 1024).toFixed(1)} MB/s of payload`;

export async function benchScaling(): Promise<BenchOutput> {
  process.env.METADATA_SERVER_DETECTION = 'none';
  const s3 = await startBenchS3();
  const dir = tempDir('orderly-bench-scaling-');
  const remote = await startRemote(dir.path);
  try {
    const runs = [
      { subscription: 'scale-w1', workers: 1, format: TEXT, name: 'text' },
      { subscription: 'scale-w2', workers: 2, format: TEXT, name: 'text' },
      { subscription: 'scale-w3', workers: 3, format: TEXT, name: 'text' },
      { subscription: 'scale-avro', workers: 1, format: { avroConfig: { writeMetadata: true } }, name: 'Avro with metadata' },
      { subscription: 'scale-parquet', workers: 1, format: { parquetConfig: { writeMetadata: true } }, name: 'Parquet with metadata' },
    ];
    const from = await prepareBacklog(
      remote,
      runs.map((r) => r.subscription),
    );
    const baseline = await embedded(s3);
    const results: BenchResult[] = [
      { name: 'embedded core, one process, text objects (baseline)', perSecond: baseline, baseline, extra: mbps(baseline) },
    ];
    for (const run of runs) {
      const { rate, restarts } = await fleetRun(dir.path, remote, s3, run.subscription, from, run.workers, run.format);
      results.push({
        name: `orderly serve -> ${run.workers} worker${run.workers > 1 ? 's' : ''} -> ${run.name} objects`,
        perSecond: rate,
        baseline,
        extra: `${mbps(rate)}; ${MESSAGES.toLocaleString('en-US')} msgs of ${payloadBytes} B over ${KEYS} keys, ${WORKER_BUDGET} held per worker, idle flush ${IDLE_FLUSH_SECONDS} s${
          restarts ? `; ${restarts} worker restart${restarts > 1 ? 's' : ''} for messages in flight at the stop` : ''
        }`,
      });
    }
    return ratioTable(results);
  } finally {
    await remote.close();
    await s3.close();
    dir.remove();
  }
}
