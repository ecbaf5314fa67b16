import { Command, CommanderError, Option } from 'commander';
import { parseObjectStorageConfig } from '../../connectors/object-storage/config.js';
import { auditSubscription } from '../../connectors/object-storage/audit.js';
import { auditFleetSubscription } from '../../connectors/object-storage/fleet-audit.js';
import { DEFAULT_IDLE_TIMEOUT_SECONDS } from '../api/endpoint-limits.js';
import { isLoopback } from '../api/exposure.js';
import { OrderlyError } from '../core/errors.js';
import { resolve } from 'node:path';
import { jobSchema, loadJob, JobConfigError, type JobConfig } from '../job/job-config.js';
import { readLock } from '../job/job-lock.js';
import { JobRuntime } from '../job/job-runtime.js';
import { fleetStatus, flatRow } from '../job/fleet-status.js';
import { statusOf } from '../job/metrics.js';
import { queryJob } from '../job/query.js';
import { findRemoteExport, sharedObjectStorage } from '../job/remote-job.js';
import { keepServingOnUnexpectedErrors } from '../job/unexpected-errors.js';
import { createLogger } from '../log.js';
import { runDemo } from './demo.js';
import { publishFile, type PublishBatch } from './publish-file.js';
import type { MessageInput } from '../core/message.js';

const json = new Option('--json', 'print the result as JSON');
const out = (value: unknown, asJson: boolean | undefined, text: () => void) => (asJson ? console.log(JSON.stringify(value, null, 2)) : text());

/** The `orderly` command line. Returns the exit code: 0 ok, 1 failure, 2 invalid job file or usage. */
export async function main(argv: string[]): Promise<number> {
  quietWhenOutputCloses();
  const program = new Command()
    .name('orderly')
    .description("Google Cloud Pub/Sub's ordered delivery and export subscriptions on one machine, with real storage")
    .exitOverride()
    .showHelpAfterError();

  program
    .command('validate')
    .description('check a job file: every problem, each with its path in the file')
    .argument('<job>', 'job file (YAML or JSON)')
    .addOption(json)
    .addHelpText('after', '\nExample:\n  $ orderly validate fixtures/demo/job.yaml')
    .action((file: string, o: { json?: boolean }) => {
      const job = loadJob(file);
      out({ valid: true, topics: job.topics.length, subscriptions: job.subscriptions.length }, o.json, () =>
        console.log(`${file}: valid (${job.topics.length} topics, ${job.subscriptions.length} subscriptions)`),
      );
    });

  program
    .command('run')
    .description('run a job until SIGINT/SIGTERM: store, exports, metrics; shutdown drains and finalizes files')
    .argument('<job>', 'job file')
    .option('--worker-id <id>', 'this worker\'s id, for a job with remote: exports (default: ORDERLY_WORKER_ID, remote.workerId, else <host>-<pid>)')
    .addHelpText('after', '\nExample:\n  $ orderly run job.yaml   # Ctrl-C stops it cleanly\n  $ orderly run job.yaml --worker-id exporter-2   # one more worker of a remote export')
    .action(async (file: string, o: { workerId?: string }) => {
      const logger = createLogger();
      keepServingOnUnexpectedErrors(logger);
      const runtime = await JobRuntime.start(loadJob(file), logger, { serveMetrics: true, workerId: o.workerId });
      logger.info({ ...runtime.reconciled, metrics: runtime.metricsUrl, pubsubEndpoint: runtime.endpointPort, worker: runtime.workerId }, 'job running');
      const signal = await untilStopSignal();
      logger.info({ signal }, 'stopping: finishing writes, finalizing open files');
      const timer = setTimeout(() => {
        logger.error('shutdown took over 60 s; exiting (unacked messages will be delivered again)');
        process.exit(1);
      }, 60_000);
      timer.unref();
      await runtime.stop();
      logger.info('stopped');
    });

  program
    .command('publish')
    .description('publish a JSONL file (or stdin) to a topic, one message per line')
    .argument('<job>', 'job file')
    .requiredOption('--topic <topic>', 'topic to publish to')
    .option('--file <path>', 'JSONL file, or - for stdin', '-')
    .option('--ordering-key-field <field>', 'take each message\'s ordering key from this field')
    .option('--attributes-field <field>', 'take each message\'s attributes from this field (an object of strings)')
    .addOption(json)
    .addHelpText('after', '\nExample:\n  $ orderly publish job.yaml --topic order-changes --file orders.jsonl --ordering-key-field order_id')
    .action(async (file: string, o: { topic: string; file: string; orderingKeyField?: string; attributesField?: string; json?: boolean }) => {
      const job = loadJob(file);
      const running = readLock(job.dataDir);
      if (running && !running.endpoint) {
        throw new OrderlyError('FAILED_PRECONDITION', `the job is running (pid ${running.pid}) without a Pub/Sub endpoint: add endpoint: to the job file, or stop it and publish here`);
      }
      // A running job is reached through its endpoint; otherwise the store is opened here.
      const runtime = running ? undefined : await JobRuntime.start(job, createLogger(), { withExports: false });
      const publish: PublishBatch = runtime
        ? (messages) => runtime.core.publish(o.topic, messages)
        : (messages) => publishOverRest(running!.endpoint!, job.projectId, o.topic, messages, job.endpoint?.authToken ?? process.env.ORDERLY_TOKEN);
      try {
        const report = await publishFile(publish, { ...o, progress: !o.json && process.stderr.isTTY });
        out(report, o.json, () => {
          for (const r of report.refused.slice(0, 20)) console.error(`line ${r.line}: ${r.reason}`);
          if (report.refused.length > 20) console.error(`... and ${report.refused.length - 20} more`);
          console.log(`published ${report.published}, refused ${report.refused.length}`);
        });
        if (report.refused.length) process.exitCode = 1;
      } finally {
        await runtime?.stop();
      }
    });

  program
    .command('status')
    .description('per subscription: state, backlog, oldest unacked age, hot keys, exported count')
    .argument('<job>', 'job file')
    .addOption(json)
    .addHelpText('after', '\nExample:\n  $ orderly status job.yaml --json')
    .action(async (file: string, o: { json?: boolean }) => {
      const job = loadJob(file);
      const running = job.remote ? undefined : readLock(job.dataDir);
      let status: (ReturnType<typeof statusOf>[number] | Awaited<ReturnType<typeof fleetStatus>>[number])[];
      if (job.remote) status = await fleetStatus(job);
      else if (running?.metrics) status = (await (await fetch(`${running.metrics}/status`)).json()) as typeof status;
      else status = await withJob(job, async (runtime) => statusOf(runtime.core));
      out(status, o.json, () => (status.length ? console.table(status.map(flatRow)) : console.log('no worker of this job runs on this machine')));
    });

  program
    .command('audit')
    .description('check per-key order across the files of an object-storage subscription')
    .argument('<job>', 'job file')
    .argument('<subscription>', 'subscription name')
    .addOption(json)
    .addHelpText('after', '\nExample:\n  $ orderly audit job.yaml orders-to-files --json')
    .action(async (file: string, name: string, o: { json?: boolean }) => {
      const job = loadJob(file);
      const failed = (r: Awaited<ReturnType<typeof auditSubscription>>) => r.missing.count + r.duplicates.count + r.outOfOrderInFile.count + r.objectErrors.count > 0;
      if (job.remote) {
        // A fleet's manifest lives in the bucket: read from there, from any machine, with no worker running here.
        const found = findRemoteExport(job, name);
        if (!found.export.cloudStorageConfig) throw new OrderlyError('INVALID_ARGUMENT', `${found.subscription} is not an object-storage (cloudStorageConfig) export`);
        const config = parseObjectStorageConfig(found.export.cloudStorageConfig);
        const report = await auditFleetSubscription({ name: found.subscription, uid: found.identity.uid }, config, { objectStorage: sharedObjectStorage(job) });
        out(report, o.json, () => printAudit(report));
        if (failed(report)) process.exitCode = 1;
        return;
      }
      await withJob(job, async (runtime) => {
        const sub = runtime.core.getSubscription(name);
        if (!sub.cloudStorageConfig) throw new OrderlyError('INVALID_ARGUMENT', `${sub.name} is not an object-storage (cloudStorageConfig) subscription`);
        const report = await auditSubscription({ name: sub.name, uid: runtime.core.identity(sub.name).uid }, parseObjectStorageConfig(sub.cloudStorageConfig), {
          dataDir: runtime.job.dataDir,
          objectStorage: runtime.objectStorage,
        });
        out(report, o.json, () => printAudit(report));
        if (failed(report)) process.exitCode = 1;
      });
    });

  program
    .command('query')
    .description('SQL over the job\'s DuckDB database and its Parquet exports (one view per subscription); read-only unless --write')
    .argument('<job>', 'job file')
    .argument('<sql>', 'the query')
    .option('--write', 'let the SQL change the database and read or write files (COPY, ATTACH, DROP, ...); also runs the job\'s duckdb.init')
    .addOption(json)
    .addHelpText('after', '\nExample:\n  $ orderly query job.yaml "SELECT status, count(*) FROM analytics.orders GROUP BY ALL"')
    .action(async (file: string, sql: string, o: { json?: boolean; write?: boolean }) => {
      const job = loadJob(file);
      // Read-only, the job is opened without its DuckDB database (so no init statement writes to it), and the
      // query opens the file itself, read-only: nothing else in this process holds it.
      const rows = o.write
        ? await withJob(job, (runtime) => queryJob(runtime, sql, { mode: 'shared' }))
        : await withJob({ ...job, duckdb: undefined }, (runtime) => queryJob(runtime, sql, { mode: 'read-only', duckdbPath: job.duckdb?.path }));
      out(rows, o.json, () => console.table(rows));
    });

  program
    .command('serve')
    .description('serve the Pub/Sub v1 gRPC API (for PUBSUB_EMULATOR_HOST), with the job file\'s exports if given')
    .option('--config <job>', 'job file (topics, subscriptions, DuckDB, object storage)')
    .option('--host <host>', 'address to bind (anything but loopback needs --allow-remote and a token)', '127.0.0.1')
    .option('--port <port>', 'port (0: any free port, printed at start)', '8085')
    .option('--data-dir <dir>', 'data directory when no job file is given', './orderly-data')
    .option('--allow-remote', 'allow binding an address other machines can reach (needs a token)')
    .option('--auth-token <token>', 'bearer token every call must carry (prefer the ORDERLY_TOKEN environment variable: flags show in ps)')
    .option('--idle-timeout <seconds>', `close connections that do nothing this long (default ${DEFAULT_IDLE_TIMEOUT_SECONDS})`)
    .addHelpText(
      'after',
      '\nExamples:\n  $ orderly serve --port 8085 &\n  $ PUBSUB_EMULATOR_HOST=127.0.0.1:8085 node my-publisher.js\n' +
        '  $ ORDERLY_TOKEN=$(openssl rand -hex 24) orderly serve --host 0.0.0.0 --allow-remote',
    )
    .action(async (o: { config?: string; host: string; port: string; dataDir: string; allowRemote?: boolean; authToken?: string; idleTimeout?: string }) => {
      const logger = createLogger();
      keepServingOnUnexpectedErrors(logger);
      const job = o.config ? loadJob(o.config) : { ...jobSchema.parse({ dataDir: resolve(o.dataDir) }), file: '(none)' };
      const idleTimeoutSeconds = o.idleTimeout === undefined ? (job.endpoint?.idleTimeoutSeconds ?? DEFAULT_IDLE_TIMEOUT_SECONDS) : Number(o.idleTimeout);
      if (!(idleTimeoutSeconds >= 1 && idleTimeoutSeconds <= 3600)) throw new OrderlyError('INVALID_ARGUMENT', `--idle-timeout: must be 1 to 3600 seconds, got ${o.idleTimeout}`);
      const endpoint = {
        host: o.host,
        port: Number(o.port),
        allowRemote: o.allowRemote ?? job.endpoint?.allowRemote ?? false,
        authToken: o.authToken ?? process.env.ORDERLY_TOKEN ?? job.endpoint?.authToken,
        idleTimeoutSeconds,
      };
      const flags = { allowRemote: '--allow-remote', authToken: '--auth-token or ORDERLY_TOKEN' };
      const runtime = await JobRuntime.start({ ...job, endpoint }, logger, { serveMetrics: true, endpointFlags: flags });
      const port = runtime.endpointPort!;
      const auth = endpoint.authToken ? '; every call needs "authorization: Bearer <token>"' : '';
      if (!isLoopback(o.host)) console.error(`orderly serve: WARNING: ${o.host} is reachable from other machines; only callers with the token get in`);
      console.log(`orderly serve: Pub/Sub API (gRPC and REST) on ${o.host}:${port} (PUBSUB_EMULATOR_HOST=${o.host}:${port})${auth}`);
      await untilStopSignal();
      await runtime.stop();
    });

  program
    .command('demo')
    .description('export a CDC stream of order changes to DuckDB and Parquet files (no external service needed)')
    .option('--data-dir <dir>', 'where the demo keeps its data (default: a temporary directory, removed afterwards)')
    .addHelpText('after', '\nExample:\n  $ orderly demo\n  $ orderly demo --data-dir ./orderly-data')
    .action(async (o: { dataDir?: string }) => runDemo(o));

  try {
    await program.parseAsync(argv);
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (e) {
    if (e instanceof CommanderError) return e.exitCode === 0 ? 0 : 2;
    console.error(`orderly: ${e instanceof Error ? e.message : String(e)}`);
    return e instanceof JobConfigError || (e instanceof OrderlyError && e.code === 'INVALID_ARGUMENT') ? 2 : 1;
  }
}

export function printAudit(r: Awaited<ReturnType<typeof auditSubscription>> | Awaited<ReturnType<typeof auditFleetSubscription>>): void {
  if ('messages' in r) {
    console.log(
      `objects ${r.objects} from ${r.workers.length} worker(s), records ${r.records}, messages in the manifest view ${r.messages} ` +
        `(${r.superseded} redelivered copies superseded), keys ${r.keys}, uploads pending ${r.pendingUploads}; order checked by ${r.orderBy}`,
    );
  } else console.log(`objects ${r.objects}, records ${r.records}, keys ${r.keys} (${r.recordLevel ? 'checked record by record' : 'checked from manifest ranges'})`);
  for (const [label, f] of [
    ['missing sequences', r.missing],
    ['duplicates', r.duplicates],
    ['out of order inside a file', r.outOfOrderInFile],
    ['keys with cross-file skew', r.skewedKeys],
    ['object errors', r.objectErrors],
  ] as const) {
    console.log(`  ${label}: ${f.count}${f.examples.length ? `  e.g. ${f.examples.slice(0, 2).join('; ')}` : ''}`);
  }
}

/** `:publish` on a running job's REST endpoint; Google's JSON errors become exceptions. */
async function publishOverRest(endpoint: string, projectId: string, topic: string, messages: MessageInput[], authToken?: string): Promise<string[]> {
  const res = await fetch(`http://${endpoint}/v1/projects/${encodeURIComponent(projectId)}/topics/${encodeURIComponent(topic)}:publish`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(authToken ? { authorization: `Bearer ${authToken}` } : {}) },
    body: JSON.stringify({
      messages: messages.map((m) => ({ data: Buffer.from(m.data ?? '').toString('base64'), attributes: m.attributes, orderingKey: m.orderingKey })),
    }),
  });
  const body = (await res.json()) as { messageIds?: string[]; error?: { message: string } };
  if (!res.ok) throw new Error(body.error?.message ?? `HTTP ${res.status}`);
  return body.messageIds!;
}

/** Opens the job's data directory without starting exports, runs `fn`, and always closes it again. */
async function withJob<T>(job: JobConfig, fn: (runtime: JobRuntime) => Promise<T>): Promise<T> {
  const runtime = await JobRuntime.start(job, createLogger(), { withExports: false });
  try {
    return await fn(runtime);
  } finally {
    await runtime.stop();
  }
}

/**
 * When the reader of the output goes away (`orderly audit ... | head`), writes fail with EPIPE, which Node
 * raises as an unhandled 'error' event: a crash with a stack trace. Instead the command finishes its work
 * (a publish or a drain is never cut short) and prints nothing more.
 */
function quietWhenOutputCloses(): void {
  for (const stream of [process.stdout, process.stderr]) {
    if (!stream.listeners('error').includes(ignoreEpipe)) stream.on('error', ignoreEpipe);
  }
}

function ignoreEpipe(e: NodeJS.ErrnoException): void {
  if (e.code !== 'EPIPE') throw e;
}

function untilStopSignal(): Promise<'SIGINT' | 'SIGTERM'> {
  return new Promise((resolve) => {
    process.once('SIGINT', () => resolve('SIGINT'));
    process.once('SIGTERM', () => resolve('SIGTERM'));
  });
}
