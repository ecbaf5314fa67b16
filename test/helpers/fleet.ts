import { PubSub } from '@google-cloud/pubsub';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { OrderlyRunProcess } from '../faults/orderly-run-process.js';
import { startServe, type ServeProcess } from './serve-process.js';
import { tempDir } from './temp-dir.js';
import { startTestS3 } from './s3.js';

export const PROJECT = 'fleet-project';

/** A real `orderly serve` (child process) that also serves /status, as the remote Pub/Sub of a fleet test. */
export async function startRemote(): Promise<
  ServeProcess & { dataDir: string; backlog(subscription: string): Promise<number>; client(): PubSub; close(): Promise<void> }
> {
  const dir = tempDir('orderly-remote-');
  const config = join(dir.path, 'serve.yaml');
  writeFileSync(config, stringify({ projectId: PROJECT, dataDir: join(dir.path, 'data'), durability: 'process', metrics: { port: 0 } }));
  const serve = await startServe(['--config', config]);
  const clients: PubSub[] = [];
  return {
    ...serve,
    dataDir: join(dir.path, 'data'),
    /** Unacked messages of the subscription, as the server's /status says. */
    async backlog(subscription: string) {
      const { metrics } = JSON.parse(readFileSync(join(dir.path, 'data', 'orderly.lock'), 'utf8')) as { metrics: string };
      const rows = (await (await fetch(`${metrics}/status`)).json()) as { subscription: string; backlog: number }[];
      return rows.find((r) => r.subscription.endsWith(`/subscriptions/${subscription}`))!.backlog;
    },
    /** Google's client, pointed at this server. */
    client() {
      const client = new PubSub({ projectId: PROJECT, apiEndpoint: serve.host, emulatorMode: true });
      clients.push(client);
      return client;
    },
    async close() {
      await Promise.all(clients.map((c) => c.close()));
      await serve.stop();
      dir.remove();
    },
  };
}

/**
 * What a fleet test runs in: a temp dir and a remote (startRemote). `worker` starts an `orderly run`
 * worker; `close` kills the workers still running (those of a test that failed midway too), then stops
 * the remote and removes the dir.
 */
export async function openFleetScene(prefix: string) {
  const dir = tempDir(prefix);
  const remote = await startRemote().catch((e: unknown) => {
    dir.remove();
    throw e;
  });
  const workers: OrderlyRunProcess[] = [];
  return {
    dir,
    remote,
    worker(job: string, args: string[] = []): OrderlyRunProcess {
      const child = new OrderlyRunProcess(job, args);
      workers.push(child);
      return child;
    },
    async close() {
      for (const w of workers) w.kill('SIGKILL');
      await Promise.all(workers.map((w) => w.exited));
      await remote.close();
      dir.remove();
    },
  };
}

/**
 * openFleetScene with a real S3 server beside it, for object exports: `job` writes the workers' job file
 * (writeRemoteJob) with that server as its object storage; `close` stops it too.
 */
export async function openObjectFleetScene(prefix: string) {
  const scene = await openFleetScene(prefix);
  const s3 = await startTestS3().catch(async (e: unknown) => {
    await scene.close();
    throw e;
  });
  return {
    ...scene,
    s3,
    job: (remote: Record<string, unknown>) => writeRemoteJob(scene.dir.path, scene.remote.host, { objectStorage: s3.settings }, remote),
    async close() {
      await scene.close();
      await s3.close();
    },
  };
}

/** Writes a job file for fleet workers: `remote:` pointed at `host`, the rest as given. */
export function writeRemoteJob(dir: string, host: string, job: Record<string, unknown>, remote: Record<string, unknown>): string {
  const file = join(dir, 'job.yaml');
  writeFileSync(
    file,
    stringify({
      projectId: PROJECT,
      dataDir: join(dir, 'data'),
      metrics: { port: 0 },
      ...job,
      remote: { endpoint: host, projectId: PROJECT, ...remote },
    }),
  );
  return file;
}

/**
 * The remote topic `events` and its ordered subscription `events-to-table` (ack deadline 10 s), and a job
 * file whose workers export it into the table `events` (with the metadata columns, and `sequence` when
 * asked) of the DuckDB file `duckdbPath`, taking at most `maxMessages` at a time.
 */
export async function tableFleetJob(
  dir: string,
  remote: Awaited<ReturnType<typeof startRemote>>,
  duckdbPath: string,
  { maxMessages, sequence }: { maxMessages: number; sequence: boolean },
): Promise<string> {
  const [topic] = await remote.client().createTopic('events');
  await topic.createSubscription('events-to-table', { enableMessageOrdering: true, ackDeadlineSeconds: 10 });
  return writeRemoteJob(
    dir,
    remote.host,
    {
      duckdb: {
        path: duckdbPath,
        init: [
          `CREATE TABLE IF NOT EXISTS events(subscription_name VARCHAR, message_id VARCHAR, publish_time TIMESTAMP, data VARCHAR,
             attributes JSON, ordering_key VARCHAR${sequence ? ', sequence BIGINT' : ''})`,
        ],
      },
    },
    {
      flowControl: { maxMessages },
      exports: [
        { subscription: 'events-to-table', enableMessageOrdering: true, bigqueryConfig: { table: 'p.main.events', writeMetadata: true } },
      ],
    },
  );
}

/** What a worker's /status says of its remote export. */
export interface WorkerExportStatus {
  subscription: string;
  worker: string;
  source: { location: string; state: string; error?: string; retries: number };
  sourceRetryAt?: string;
  state: string;
  standby?: string;
  backlog: number;
  keysInFlight: number;
  lastCommitAt?: string;
  exported: number;
}

export async function workerStatus(child: OrderlyRunProcess): Promise<WorkerExportStatus> {
  const { metrics } = await child.ready;
  const rows = (await (await fetch(`${metrics}/status`)).json()) as WorkerExportStatus[];
  return rows.find((r) => 'worker' in r)!;
}

/** Publishes `count` messages over `keys` ordering keys through Google's client (ordered), `key:seq` payloads. */
export async function publishKeyed(
  client: PubSub,
  topic: string,
  count: number,
  keys: number,
  onProgress?: (published: number) => void,
): Promise<void> {
  const publisher = client.topic(topic, { messageOrdering: true, batching: { maxMessages: 500, maxMilliseconds: 5 } });
  const chunk = 2000;
  for (let start = 0; start < count; start += chunk) {
    const sends: Promise<string>[] = [];
    for (let i = start; i < Math.min(count, start + chunk); i++) {
      const key = `k${i % keys}`;
      sends.push(publisher.publishMessage({ data: Buffer.from(`${key}:${Math.floor(i / keys)}`), orderingKey: key }));
    }
    await Promise.all(sends);
    onProgress?.(Math.min(count, start + chunk));
  }
}
