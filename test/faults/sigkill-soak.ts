import { DuckDBInstance } from '@duckdb/node-api';
import { PubSub } from '@google-cloud/pubsub';
import { readdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { stringify } from 'yaml';
import { committedObjects } from '../helpers/committed-objects.js';
import { manifestPath } from '../../connectors/object-storage/object-writer.js';
import { orderly } from '../helpers/cli.js';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait-for.js';
import { startTestS3 } from '../helpers/s3.js';
import {
  checkDelivery,
  readParquetObjects,
  restoredBySequence,
  type Container,
  type DeliveryReport,
  type Finding,
} from './delivery-check.js';
import { OrderlyRunProcess } from './orderly-run-process.js';

export interface SoakOptions {
  kills: number;
  /** Every random choice (keys, kill moments) follows from it: a failing run is repeated with its seed. */
  seed: number;
  log: (line: string) => void;
}

export interface SoakReport {
  seed: number;
  kills: number;
  /** Publish calls made, and those answered with a message id. */
  published: number;
  confirmed: number;
  rows: number;
  objects: number;
  records: number;
  table: DeliveryReport;
  files: DeliveryReport;
  /** Per key across all objects in sequence order: the publisher's counter must rise too. */
  filesRestored: Finding;
  /** Message ids one sink holds and the other does not (both export every message of the topic). */
  sinksDisagree: Finding;
  /** `orderly audit --json` of the file export, and `orderly status --json` at the end. */
  audit: { missing: number; duplicates: number; outOfOrderInFile: number; objectErrors: number; records: number };
  status: { subscription: string; state: string; backlog: number }[];
}

const PROJECT = 'soak-test';
const KEYS = 24;
/** Publishes in flight per round; each round waits for its answers, which paces the publisher. */
const ROUND = 48;
/** Publishes per life of the child at most, so the backlog (and the final drain) stays bounded. */
const PER_LIFE = 2_500;

/** A small, well-known PRNG (mulberry32): reproducible from the seed, unlike Math.random. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The SIGKILL soak: a real `orderly run` child (exports to a DuckDB table and to Parquet objects on an S3
 * server this process runs) is killed at random moments and restarted on the same data directory while
 * Google's client publishes over many ordering keys; then it drains, and what the sinks hold is read back
 * and checked against every publish the client saw confirmed.
 */
export async function runSigkillSoak({ kills, seed, log }: SoakOptions): Promise<SoakReport> {
  const rand = random(seed);
  const s3 = await startTestS3();
  const dir = tempDir('orderly-soak-');
  // Every child started, so none outlives a failed soak.
  const children: OrderlyRunProcess[] = [];
  const start = () => {
    const child = new OrderlyRunProcess(job);
    children.push(child);
    return child;
  };
  const job = join(dir.path, 'job.yaml');
  try {
    const bucket = await s3.bucket();
    writeFileSync(
      job,
      stringify({
        projectId: PROJECT,
        dataDir: './data',
        duckdb: {
          path: './data/soak.duckdb',
          init: [
            'CREATE TABLE IF NOT EXISTS events(subscription_name VARCHAR, message_id VARCHAR, publish_time TIMESTAMP, data VARCHAR, attributes JSON, ordering_key VARCHAR, sequence BIGINT)',
          ],
        },
        objectStorage: { ...s3.settings },
        endpoint: { port: 0 },
        metrics: { port: 0 },
        topics: [{ name: 'events' }],
        subscriptions: [
          {
            name: 'to-table',
            topic: 'events',
            enableMessageOrdering: true,
            bigqueryConfig: { table: `${PROJECT}.main.events`, writeMetadata: true },
          },
          {
            name: 'to-files',
            topic: 'events',
            enableMessageOrdering: true,
            // Small files, so objects are committed between kills and uploads are cut by them. Not the default
            // "+00:00" names: s3rver ignores the listing's encoding-type=url, so minio would read "+" as " ".
            cloudStorageConfig: {
              bucket,
              maxBytes: 16_000,
              filenameDatetimeFormat: 'YYYY-MM-DDThh:mm:ssZ',
              parquetConfig: { writeMetadata: true },
            },
          },
        ],
      }),
    );

    const confirmed = new Map<string, { key: string; n: number }>();
    const next = new Array<number>(KEYS).fill(0);
    let published = 0;
    for (let life = 1; life <= kills; life++) {
      const child = start();
      // Mostly killed while it serves and exports; sometimes while it is still starting (store, DuckDB, reconcile).
      if (rand() < 0.15) {
        await Promise.race([sleep(100 + rand() * 2000), child.ready.catch(() => undefined)]);
        child.kill('SIGKILL');
        await checkKilled(child);
        log(`life ${life}: killed while starting`);
        continue;
      }
      const { port } = await child.ready;
      process.env.PUBSUB_EMULATOR_HOST = `127.0.0.1:${port}`;
      const pubsub = new PubSub({ projectId: PROJECT });
      const topic = pubsub.topic('events', { messageOrdering: true, batching: { maxMessages: 50, maxMilliseconds: 5 } });
      const killAt = Date.now() + 200 + rand() * 2300;
      const before = confirmed.size;
      let sent = 0;
      let paused = false;
      const publishing = (async () => {
        while (Date.now() < killAt && sent < PER_LIFE && !paused) {
          const round: Promise<unknown>[] = [];
          for (let i = 0; i < ROUND; i++) {
            const k = Math.floor(rand() * KEYS);
            const n = next[k]!++;
            const key = `key-${k}`;
            published++;
            sent++;
            const p = topic.publishMessage({ data: Buffer.from(JSON.stringify({ key, n })), orderingKey: key }).then(
              (id) => void confirmed.set(id, { key, n }),
              // A publish the server did not answer (killed) pauses its key in this client; the client is
              // replaced at the next life, and the message counts as unconfirmed (it may or may not be stored).
              () => (paused = true),
            );
            round.push(p);
          }
          await Promise.all(round);
        }
      })();
      await sleep(Math.max(0, killAt - Date.now()));
      child.kill('SIGKILL');
      await checkKilled(child);
      await pubsub.close(); // its publishes still in flight fail now, not after the client's retry deadline
      await publishing;
      log(`life ${life}: published ${sent}, confirmed ${confirmed.size - before}, killed`);
    }

    const status = await drain(job, start, log);
    const auditRun = await orderly('audit', job, 'to-files', '--json');
    const audit = JSON.parse(auditRun.stdout) as {
      records: number;
      missing: Finding;
      duplicates: Finding;
      outOfOrderInFile: Finding;
      objectErrors: Finding;
    };

    const position = (data: Buffer | string) => (JSON.parse(data.toString()) as { n: number }).n;
    const table = await readTable(join(dir.path, 'data', 'soak.duckdb'), position);
    // The manifest lives under the subscription's uid, the one directory below its name.
    const [uidDir] = readdirSync(
      dirname(dirname(manifestPath(join(dir.path, 'data'), { name: `projects/${PROJECT}/subscriptions/to-files`, uid: 'x' }))),
    );
    const objects = committedObjects(
      manifestPath(join(dir.path, 'data'), { name: `projects/${PROJECT}/subscriptions/to-files`, uid: uidDir! }),
    );
    const listed = await s3.list(bucket);
    const files = await readParquetObjects(s3, bucket, objects, position);
    const strays = listed.filter((o) => !objects.includes(o));
    const tableIds = new Set(table.records.map((r) => r.messageId));
    const fileIds = new Set(files.flatMap((f) => f.records.map((r) => r.messageId)));
    const sinksDisagree: Finding = { count: 0, examples: [] };
    for (const id of [...tableIds].filter((i) => !fileIds.has(i)).concat([...fileIds].filter((i) => !tableIds.has(i)))) {
      sinksDisagree.count++;
      if (sinksDisagree.examples.length < 5)
        sinksDisagree.examples.push(`${id} (${tableIds.has(id) ? 'only in the table' : 'only in the objects'})`);
    }
    for (const o of strays) {
      sinksDisagree.count++;
      if (sinksDisagree.examples.length < 5) sinksDisagree.examples.push(`object ${o} is in the bucket but not in the manifest`);
    }
    return {
      seed,
      kills,
      published,
      confirmed: confirmed.size,
      rows: table.records.length,
      objects: objects.length,
      records: files.reduce((n, f) => n + f.records.length, 0),
      table: checkDelivery(confirmed.keys(), [table]),
      files: checkDelivery(confirmed.keys(), files),
      filesRestored: checkDelivery([], [restoredBySequence(files)]).orderViolations,
      sinksDisagree,
      audit: {
        records: audit.records,
        missing: audit.missing.count,
        duplicates: audit.duplicates.count,
        outOfOrderInFile: audit.outOfOrderInFile.count,
        objectErrors: audit.objectErrors.count,
      },
      status: status.map(({ subscription, state, backlog }) => ({ subscription, state, backlog })),
    };
  } finally {
    for (const child of children) child.kill('SIGKILL');
    await Promise.all(children.map((c) => c.exited));
    await s3.close();
    dir.remove();
  }
}

/** A child that ended on its own (not by our SIGKILL) is a crash: the soak stops with its output. */
async function checkKilled(child: OrderlyRunProcess): Promise<void> {
  const { signal, code } = await child.exited;
  if (signal !== 'SIGKILL') throw new Error(`orderly run ended by itself (${code ?? signal}) instead of being killed\n${child.output()}`);
}

/**
 * Lets the last run export everything: the table's backlog empties on its own; the open files of the
 * object export are finalized by a clean stop (SIGTERM). Repeated until nothing is left.
 */
async function drain(job: string, start: () => OrderlyRunProcess, log: (line: string) => void): Promise<SoakReport['status']> {
  for (let round = 1; round <= 5; round++) {
    const child = start();
    const { metrics } = await child.ready;
    let last = '';
    let stableSince = Date.now();
    await waitFor(
      'the exports to take in the backlog',
      async () => {
        const status = (await (await fetch(`${metrics}/status`)).json()) as { subscription: string; backlog: number; state: string }[];
        const now = JSON.stringify(status.map((s) => [s.state, s.backlog]));
        if (now !== last) [last, stableSince] = [now, Date.now()];
        return status.find((s) => s.subscription.endsWith('/to-table'))?.backlog === 0 && Date.now() - stableSince > 1_000;
      },
      120_000,
    );
    child.kill('SIGTERM');
    const { code } = await child.exited;
    if (code !== 0) throw new Error(`orderly run did not stop cleanly (${code})\n${child.output()}`);
    const status = JSON.parse((await orderly('status', job, '--json')).stdout) as SoakReport['status'];
    log(`drain ${round}: backlog ${status.map((s) => s.backlog).join(', ')}`);
    if (status.every((s) => s.backlog === 0)) return status;
  }
  throw new Error('the backlog did not drain in 5 clean runs');
}

/** The table's rows in the order they were appended (rowid), read with DuckDB directly, read-only. */
async function readTable(path: string, position: (data: string) => number): Promise<Container> {
  const instance = await DuckDBInstance.create(path, { access_mode: 'READ_ONLY' });
  try {
    const connection = await instance.connect();
    const rows = (
      await connection.runAndReadAll('SELECT message_id, ordering_key, sequence, data FROM main.events ORDER BY rowid')
    ).getRowObjects() as {
      message_id: string;
      ordering_key: string;
      sequence: bigint;
      data: string;
    }[];
    connection.closeSync();
    return {
      name: 'table main.events',
      records: rows.map((r) => ({
        messageId: r.message_id,
        orderingKey: r.ordering_key,
        sequence: Number(r.sequence),
        position: position(r.data),
      })),
    };
  } finally {
    instance.closeSync();
  }
}
