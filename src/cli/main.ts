import { Command, CommanderError, Option } from 'commander';
import { readFileSync } from 'node:fs';
import { constants as osConstants } from 'node:os';
import { resolve } from 'node:path';
import { DEFAULT_IDLE_TIMEOUT_SECONDS } from '../api/endpoint-limits.js';
import { hostPort, isLoopback, localHostPort, tokenFromEnvironment } from '../api/exposure.js';
import { OrderlyError } from '../core/errors.js';
import { holdProcess } from '../core/process-keep-alive.js';
import { projectOf, resourceName, shortId } from '../core/names.js';
import { packageFile } from '../package-file.js';
import type { MessageInput } from '../core/message.js';
import type { JobChecks, JobConfig } from '../job/job-config.js';
import type { JobMode, JobRuntime } from '../job/job-runtime.js';
import type { RowSink } from '../job/query.js';
import type { Logger } from '../log.js';
import type { SnapshotStatus, statusOf } from '../job/metrics.js';
import type { PublishBatch } from './publish-file.js';
import { answerCollector } from './answer-table.js';

// Each command imports what it needs when it runs: `orderly --help` or `orderly validate` must not load
// DuckDB, the AWS SDK, gRPC or the store.
const loadJobFile = async (file: string, checks?: JobChecks) =>
  (await import('../job/job-config.js')).loadJobWithPlugins(file, process.env, checks);
const createLogger = async (options?: { level?: string }) => (await import('../log.js')).createLogger(options);
const keepServingOnUnexpectedErrors = async () => {
  const logger = await createLogger();
  (await import('../job/unexpected-errors.js')).keepServingOnUnexpectedErrors(logger);
  return logger;
};

const json = new Option('--json', 'print the result as JSON');
const out = (value: unknown, asJson: boolean | undefined, text: () => void) =>
  asJson ? console.log(JSON.stringify(value, null, 2)) : text();

/**
 * The `orderly` command line. Returns the exit code: 0 ok, 1 failure, 2 invalid job file or usage, 3 an
 * audit that could not be completed.
 */
export async function main(argv: string[]): Promise<number> {
  quietWhenOutputCloses();
  // A script that asked for JSON reads stdout: a failure is answered there too (the text still goes to stderr).
  const asJson = argv.slice(2).includes('--json');
  /** `validate --json` answers a job file's problems itself, as `{ valid: false, problems }`. */
  let answered = false;
  const program = new Command()
    .name('orderly')
    .description("Google Cloud Pub/Sub's ordered delivery and export subscriptions on one machine, with real storage")
    .version((JSON.parse(readFileSync(packageFile('package.json'), 'utf8')) as { version: string }).version)
    .exitOverride()
    .showHelpAfterError();

  program
    .command('validate')
    .description('check a job file: every problem, each with its path in the file')
    .argument('<job>', 'job file (YAML or JSON)')
    .addOption(json)
    .addHelpText('after', '\nExample:\n  $ orderly validate fixtures/demo/job.yaml')
    .action(async (file: string, o: { json?: boolean }) => {
      let job: Awaited<ReturnType<typeof loadJobFile>>;
      try {
        // As creating each subscription checks it: whether the data directory keeps an older one is not its to say.
        job = await loadJobFile(file, { asCreated: true });
      } catch (e) {
        // --json answers on stdout either way; the problems still go to stderr and the exit code is still 2.
        const { JobConfigError } = await import('../job/job-config.js');
        if (o.json && e instanceof JobConfigError) {
          console.log(JSON.stringify({ valid: false, problems: e.problems }, null, 2));
          answered = true;
        }
        throw e;
      }
      // A fleet worker's job has no topics or subscriptions of its own: count what it exports instead.
      const remoteExports = job.remote?.exports.length;
      const counts: Record<string, number> =
        remoteExports === undefined
          ? { topics: job.topics.length, subscriptions: job.subscriptions.length, schemas: job.schemas.length }
          : { remoteExports };
      const said = { topics: 'topic', subscriptions: 'subscription', schemas: 'schema', remoteExports: 'remote export' };
      const listed = Object.entries(counts).map(([key, n]) => `${n} ${said[key as keyof typeof said]}${n === 1 ? '' : 's'}`);
      out({ valid: true, ...counts }, o.json, () => console.log(`${file}: valid (${listed.join(', ')})`));
    });

  program
    .command('run')
    .description('run a job until SIGINT/SIGTERM/SIGHUP: store, exports, metrics; shutdown drains and finalizes files')
    .argument('<job>', 'job file')
    .option(
      '--worker-id <id>',
      "this worker's id, for a job with remote: exports (default: ORDERLY_WORKER_ID, remote.workerId, else <host>-<pid>)",
    )
    .addHelpText(
      'after',
      '\nExample:\n  $ orderly run job.yaml   # Ctrl-C stops it cleanly\n  $ orderly run job.yaml --worker-id exporter-2   # one more worker of a remote export',
    )
    .action(async (file: string, o: { workerId?: string }) => {
      const logger = await keepServingOnUnexpectedErrors();
      const job = await loadJobFile(file);
      // Only a worker of a remote export has an id: the job ran as if the flag had not been given.
      if (o.workerId !== undefined && !job.remote)
        throw new OrderlyError(
          'INVALID_ARGUMENT',
          `--worker-id: ${file} has no remote: section; a worker id names one worker of a remote export`,
        );
      const stopSignals = watchStopSignals(logger);
      logger.info({ job: file }, 'job starting');
      const { JobRuntime } = await import('../job/job-runtime.js');
      const runtime = await JobRuntime.start(job, logger, { serveMetrics: true, workerId: o.workerId });
      const stopSignal = stopSignals.until(runtime);
      logger.info(
        { ...runtime.reconciled, metrics: runtime.metricsUrl, pubsubEndpoint: runtime.endpointPort, worker: runtime.workerId },
        'job running',
      );
      warnOfUnlisted(logger, runtime);
      const signal = await stopSignal;
      logger.info({ signal }, 'stopping: finishing writes, finalizing open files');
      if (signal === 'failure') process.exitCode = 1;
      // Not unref'd: a connector call that never returns leaves nothing else pending, and Node would exit
      // with code 13 (an unsettled await) at once, without this line or the lock file removed.
      const timer = setTimeout(() => {
        logger.error('shutdown took over 60 s; exiting (unacked messages will be delivered again)');
        process.exit(1);
      }, 60_000);
      await runtime.stop();
      clearTimeout(timer);
      logger.info('stopped');
      if (signal === 'SIGHUP') endByHangUp();
      // The job is done and its lock released. What may still be pending is the remote client's retries
      // of acks to an endpoint that is gone (google-gax backs off for minutes): those messages come again
      // and are found written, so the process ends now rather than when the retries give up.
      setTimeout(() => process.exit(), 1000).unref();
    });

  program
    .command('publish')
    .description('publish a JSONL file (or stdin) to a topic, one message per line')
    .argument('<job>', 'job file')
    .requiredOption('--topic <topic>', 'topic to publish to')
    .option('--file <path>', 'JSONL file, or - for stdin', '-')
    .option('--ordering-key-field <field>', "take each message's ordering key from this field")
    .option('--attributes-field <field>', "take each message's attributes from this field (an object of strings)")
    .addOption(json)
    .addHelpText(
      'after',
      '\nExample:\n  $ orderly publish job.yaml --topic order-changes --file orders.jsonl --ordering-key-field order_id',
    )
    .action(
      async (file: string, o: { topic: string; file: string; orderingKeyField?: string; attributesField?: string; json?: boolean }) => {
        const job = await loadJobFile(file);
        // A bare id is in the job's project; a full name may be any project's. Checked once here: the core
        // and the endpoint refuse a bad name as INVALID_ARGUMENT, which would refuse each line in turn.
        const topic = resourceName('topics', o.topic, job.projectId, '--topic');
        const { runningJobLock } = await import('../job/job-lock.js');
        const { publishFile } = await import('./publish-file.js');
        const running = runningJobLock(job.dataDir);
        if (running && !running.endpoint) {
          throw new OrderlyError(
            'FAILED_PRECONDITION',
            `the job is running (pid ${running.pid}) without a Pub/Sub endpoint: add endpoint: to the job file, or stop it and publish here`,
          );
        }
        // A running job is reached through its endpoint; otherwise the store is opened here.
        const runtime = running
          ? undefined
          : await (await import('../job/job-runtime.js')).JobRuntime.start(job, await createLogger(), { mode: 'store-only' });
        const publish: PublishBatch = runtime
          ? (messages) => runtime.core.publish(topic, messages)
          : (messages) => publishOverRest(running!.endpoint!, topic, messages, job.endpoint?.authToken ?? tokenFromEnvironment());
        // Ctrl-C (or a supervisor's SIGTERM) had killed the process mid-file: no count, no line to go on from,
        // and the store left unclosed. Now it stops reading, publishes what it read, and says up to which line;
        // a second signal ends the process at once (its default, the listener being gone).
        const stop = new AbortController();
        const onStop = (signal: NodeJS.Signals) => stop.abort(signal);
        for (const signal of PUBLISH_STOP_SIGNALS) process.once(signal, onStop);
        try {
          const report = await publishFile(publish, { ...o, progress: !o.json && process.stderr.isTTY, stop: stop.signal });
          out(report, o.json, () => {
            for (const r of report.refused.slice(0, 20)) console.error(`line ${r.line}: ${r.reason}`);
            if (report.refused.length > 20) console.error(`... and ${report.refused.length - 20} more`);
            if (report.stopped)
              console.error(
                `stopped by ${report.stopped.signal}: every line up to line ${report.stopped.lastLine} was published or refused, none after it`,
              );
            console.log(`published ${report.published}, refused ${report.refused.length}`);
          });
          if (report.refused.length) process.exitCode = 1;
          // As a shell reports a process its signal ended: 128 + the signal's number.
          if (report.stopped) process.exitCode = 128 + osConstants.signals[report.stopped.signal as NodeJS.Signals];
        } finally {
          for (const signal of PUBLISH_STOP_SIGNALS) process.off(signal, onStop);
          await runtime?.stop();
        }
      },
    );

  program
    .command('status')
    .description('per subscription: state, backlog, oldest unacked age, hot keys, exported count')
    .argument('<job>', 'job file')
    .addOption(json)
    .addHelpText('after', '\nExample:\n  $ orderly status job.yaml --json')
    .action(async (file: string, o: { json?: boolean }) => {
      const job = await loadJobFile(file);
      if (job.remote) {
        // A fleet worker of a remote export: every worker of the job running on this machine.
        const { fleetStatus, flatRow } = await import('../job/fleet-status.js');
        const rows = await fleetStatus(job);
        out(rows, o.json, () =>
          rows.length ? console.table(rows.map(flatRow)) : console.log('no worker of this job runs on this machine'),
        );
        return;
      }
      const running = (await import('../job/job-lock.js')).runningJobLock(job.dataDir);
      type SubscriptionRow = ReturnType<typeof statusOf>[number];
      let rows: (SubscriptionRow | SnapshotStatus)[];
      if (running?.metrics)
        rows = await (await import('../job/status-endpoint.js')).readStatus<typeof rows>(running.metrics, job.metrics?.authToken);
      else if (running) {
        // The running job holds the store; only its own /status can say what it is doing.
        throw new OrderlyError(
          'FAILED_PRECONDITION',
          `the job running on ${job.dataDir} (pid ${running.pid}) serves no status: give its job file a metrics section (e.g. metrics: { port: 0 }) and restart it, or stop it first`,
        );
      } else {
        const { HOT_KEYS, snapshotStatusOf, statusOf } = await import('../job/metrics.js');
        rows = await withJob(
          job,
          async (runtime) => {
            runtime.core.countBacklogs(HOT_KEYS);
            return [...statusOf(runtime.core, undefined, runtime.exportStates), ...snapshotStatusOf(runtime.core, Infinity)];
          },
          'store-only',
        );
      }
      out(rows, o.json, () => {
        const mib = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MiB`;
        const status = rows.filter((r): r is SubscriptionRow => !('snapshot' in r));
        const snapshots = rows.filter((r): r is SnapshotStatus => 'snapshot' in r);
        console.table(
          status.map(({ residentBytes, payloadLimitBytes: _limit, heldMessages, windowMessages, exportBudget, ...s }) => ({
            ...s,
            hotKeys: s.hotKeys.map((k) => `${k.orderingKey}:${k.backlog}`).join(' '),
            exportCounters:
              s.exportCounters &&
              Object.entries(s.exportCounters)
                .map(([name, n]) => `${name}=${n}`)
                .join(' '),
            residentPayload: mib(residentBytes),
            heldMessages,
            windowMessages,
            exportBudget,
          })),
        );
        const resident = status.reduce((n, s) => n + s.residentBytes, 0);
        if (status[0]) console.log(`payload memory: ${mib(resident)} of ${mib(status[0].payloadLimitBytes)} (memory.payloadBytes)`);
        for (const s of status.filter((s) => s.keepsAckedSeconds > 0))
          console.log(`${s.subscription} keeps its acked messages in the store for ${s.keepsAckedSeconds} s (retainAckedMessages)`);
        if (snapshots.length) {
          console.log("snapshots (each keeps its topic's messages from its oldest unacked one on in the store until it expires):");
          console.table(
            snapshots.map(({ counting, heldMessages, heldBytes, ...s }) => {
              const soFar = (n: number) => (counting ? `${n} so far (counting)` : n);
              return { ...s, heldMessages: soFar(heldMessages), heldBytes: soFar(heldBytes), held: mib(heldBytes) };
            }),
          );
        }
        // Read from the store, and an export's state as the job last saw its sink: nothing exports now.
        if (!running) console.log(`no job is running on ${job.dataDir}: export states are as the job last saw them, and no export runs`);
      });
    });

  program
    .command('audit')
    .description(
      "check per-key order of what an export subscription wrote, read back from its sink (connectors that offer it: object-storage's files)",
    )
    .argument('<job>', 'job file')
    .argument('<subscription>', 'subscription name')
    .addOption(json)
    .addHelpText('after', '\nExample:\n  $ orderly audit job.yaml orders-to-files --json')
    .action(async (file: string, name: string, o: { json?: boolean }) => {
      const { auditExport, refuseNeverRan } = await import('../job/export-audit.js');
      const { auditFailed, printAudit } = await import('./print-audit.js');
      const job = await loadJobFile(file);
      try {
        refuseNeverRan(job);
        // Read-only, as a query: an audit had created the data directory of a job that never ran, its
        // store, DuckDB file and S3 folders, and run the job's duckdb.init.
        await withJob(
          job,
          async (runtime) => {
            const audit = await auditExport(runtime, name);
            out(audit.report, o.json, () => printAudit(audit));
            if (auditFailed(audit)) process.exitCode = 1;
          },
          'read-only',
        );
      } catch (e) {
        if (isUsageError(e)) throw e;
        // Exit 1 says the records are wrong; an audit that could not look (the bucket unreachable, the
        // data directory in use) says nothing about them.
        console.error(`orderly: the audit could not be completed: ${e instanceof Error ? e.message : String(e)}`);
        if (o.json) printJsonError(e);
        process.exitCode = 3;
      }
    });

  program
    .command('query')
    .description(
      "SQL over the job's DuckDB database and its exports (a view per subscription whose connector offers one); read-only unless --write",
    )
    .argument('<job>', 'job file')
    .argument('<sql>', 'the query')
    .option('--write', "let the SQL change the database and read or write files (COPY, ATTACH, DROP, ...); also runs the job's duckdb.init")
    .addOption(json)
    .addHelpText('after', '\nExample:\n  $ orderly query job.yaml "SELECT status, count(*) FROM analytics.orders GROUP BY ALL"')
    .action(async (file: string, sql: string, o: { json?: boolean; write?: boolean }) => {
      // DuckDB's own answer to no statement at all is "Error in native callback".
      if (!sql.trim()) throw new OrderlyError('INVALID_ARGUMENT', '<sql>: is empty: give the query to run');
      const job = await loadJobFile(file);
      const { queryJob } = await import('../job/query.js');
      // Read-only, the job's sections open nothing for writing (so no init statement writes to the database),
      // and the query opens the file itself, read-only: nothing else in this process holds it.
      // The answer is read from DuckDB a chunk at a time: --json writes every row; the table holds the first
      // TABLE_ROWS and counts the rest (an answer of millions of rows had to fit in the heap, twice, and
      // crashed the process with V8's out-of-memory trace).
      const jsonOut = o.json ? jsonArrayWriter(process.stdout) : undefined;
      const answer = answerCollector(TABLE_ROWS);
      const onRows: RowSink = jsonOut ? (rows) => jsonOut.write(rows) : answer.onRows;
      const note = (text: string) => console.error(`orderly: note: ${text}`);
      await withJob(job, (runtime) => queryJob(runtime, sql, note, onRows), o.write ? 'inspect' : 'read-only');
      if (jsonOut) return jsonOut.end();
      console.log(answer.table());
      if (answer.left())
        note(
          `the table shows the first ${TABLE_ROWS} rows; ${answer.left()} more not shown (narrow the query, or use --json for every row)`,
        );
    });

  program
    .command('serve')
    .description("serve the Pub/Sub v1 API, gRPC and REST on one port (for PUBSUB_EMULATOR_HOST), with the job file's exports if given")
    .option('--config <job>', 'job file (topics, subscriptions, DuckDB, object storage)')
    .option(
      '--host <host>',
      "address to bind (default: the job's endpoint.host, else 127.0.0.1; anything but loopback needs --allow-remote and a token)",
    )
    .option('--port <port>', "port (default: the job's endpoint.port, else 8085; 0: any free port, printed at start)")
    .option('--data-dir <dir>', 'data directory when no job file is given', './orderly-data')
    .option('--allow-remote', 'allow binding an address other machines can reach (needs a token)')
    .option('--auth-token <token>', 'bearer token every call must carry (prefer the ORDERLY_TOKEN environment variable: flags show in ps)')
    .option('--idle-timeout <seconds>', `close connections that do nothing this long (default ${DEFAULT_IDLE_TIMEOUT_SECONDS})`)
    .addHelpText(
      'after',
      '\nExamples:\n  $ orderly serve --port 8085 &\n  $ PUBSUB_EMULATOR_HOST=127.0.0.1:8085 node my-publisher.js\n' +
        '  $ ORDERLY_TOKEN=$(openssl rand -hex 24) orderly serve --host 0.0.0.0 --allow-remote',
    )
    .action(
      async (
        o: {
          config?: string;
          host?: string;
          port?: string;
          dataDir: string;
          allowRemote?: boolean;
          authToken?: string;
          idleTimeout?: string;
        },
        command: Command,
      ) => {
        // The job file's dataDir is the data directory: the flag's had been dropped without a word, and the
        // data went where the user did not look for it.
        if (o.config && command.getOptionValueSource('dataDir') === 'cli')
          throw new OrderlyError(
            'INVALID_ARGUMENT',
            `--data-dir: ${o.config} names the data directory (dataDir); give --config or --data-dir, not both`,
          );
        // The flags are checked before the job file is loaded: a mistyped flag is answered at once, not after
        // the job's modules loaded (0.5 s of CPU, against 0.14 s for --help).
        const idleTimeoutFlag = o.idleTimeout === undefined ? undefined : Number(o.idleTimeout);
        if (idleTimeoutFlag !== undefined && !(idleTimeoutFlag >= 1 && idleTimeoutFlag <= 3600))
          throw new OrderlyError('INVALID_ARGUMENT', `--idle-timeout: must be 1 to 3600 seconds, got ${o.idleTimeout}`);
        // Digits only: Number() reads '' and ' ' as 0 (any free port: `--port "$PORT"` with PORT unset served
        // on a port no client knew) and '0x1f90' or '8e3' as other ports than written.
        const portFlag = o.port === undefined ? undefined : /^\d{1,5}$/.test(o.port) ? Number(o.port) : NaN;
        if (portFlag !== undefined && !(Number.isInteger(portFlag) && portFlag >= 0 && portFlag <= 65535))
          throw new OrderlyError('INVALID_ARGUMENT', `--port: must be an integer from 0 to 65535, got ${o.port}`);
        const logger = await keepServingOnUnexpectedErrors();
        const job = o.config ? await loadJobFile(o.config) : (await import('../job/job-config.js')).bareJob(resolve(o.dataDir));
        // The flags override the job file's endpoint section, field by field, as for the token.
        const endpoint = {
          host: o.host ?? job.endpoint?.host ?? '127.0.0.1',
          port: portFlag ?? job.endpoint?.port ?? 8085,
          idleTimeoutSeconds: idleTimeoutFlag ?? job.endpoint?.idleTimeoutSeconds ?? DEFAULT_IDLE_TIMEOUT_SECONDS,
          allowRemote: o.allowRemote ?? job.endpoint?.allowRemote ?? false,
          authToken: o.authToken ?? tokenFromEnvironment() ?? job.endpoint?.authToken,
        };
        const flags = { allowRemote: '--allow-remote', authToken: '--auth-token or ORDERLY_TOKEN' };
        const stopSignals = watchStopSignals(logger);
        const { JobRuntime } = await import('../job/job-runtime.js');
        const runtime = await JobRuntime.start({ ...job, endpoint }, logger, { serveMetrics: true, endpointFlags: flags });
        // Without a job file every subscription is the API's: none is missing from a file.
        if (o.config) warnOfUnlisted(logger, runtime);
        const bound = runtime.endpointPort!;
        const { host } = endpoint;
        const auth = endpoint.authToken ? '; every call needs "authorization: Bearer <token>"' : '';
        if (!isLoopback(host))
          console.error(`orderly serve: WARNING: ${host} is reachable from other machines; only callers with the token get in`);
        const stopSignal = stopSignals.until(runtime);
        console.log(
          `orderly serve: Pub/Sub API (gRPC and REST) on ${hostPort(host, bound)} (PUBSUB_EMULATOR_HOST=${localHostPort(host, bound)})${auth}`,
        );
        const signal = await stopSignal;
        if (signal === 'failure') process.exitCode = 1;
        await runtime.stop();
        if (signal === 'SIGHUP') endByHangUp();
      },
    );

  program
    .command('demo')
    .description('export a CDC stream of order changes to DuckDB and Parquet files (no external service needed)')
    .option('--data-dir <dir>', 'where the demo keeps its data (default: a temporary directory, removed afterwards)')
    .addHelpText('after', '\nExample:\n  $ orderly demo\n  $ orderly demo --data-dir ./orderly-data')
    .action(async (o: { dataDir?: string }) => (await import('./demo.js')).runDemo(o));

  try {
    await program.parseAsync(argv);
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (e) {
    // Commander has printed its own message (or the help, or the version: exit 0).
    if (e instanceof CommanderError && e.exitCode === 0) return 0;
    if (!(e instanceof CommanderError)) console.error(`orderly: ${e instanceof Error ? e.message : String(e)}`);
    if (asJson && !answered) printJsonError(e);
    // exit 1 stays what a command found (an audit's missing records, refused lines).
    return e instanceof CommanderError || isUsageError(e) ? 2 : 1;
  }
}

/**
 * A failure as `--json` prints it on stdout, `{ "error": { code, message, problems? } }`: an invalid job
 * file, a missing topic or a SQL error had printed text on stderr only, and nothing a script could parse.
 */
function printJsonError(e: unknown): void {
  const code = e instanceof CommanderError ? 'INVALID_ARGUMENT' : e instanceof OrderlyError ? e.code : 'UNKNOWN';
  const message = e instanceof Error ? e.message : String(e);
  // A job file's problems (JobConfigError), each with its path in the file.
  const problems = (e as { problems?: unknown }).problems;
  console.log(JSON.stringify({ error: { code, message, ...(Array.isArray(problems) ? { problems } : {}) } }, null, 2));
}

/** Signals that stop `orderly publish` after the lines it has read. */
const PUBLISH_STOP_SIGNALS = ['SIGINT', 'SIGTERM'] as const;

/** The most rows `orderly query` prints as a table (--json prints every row). */
const TABLE_ROWS = 10_000;

/**
 * Writes a JSON array of rows to `stream` a chunk at a time, as `JSON.stringify(rows, null, 2)` would print
 * it whole, waiting while the stream's buffer is full (a reader that has gone away ends the wait).
 */
function jsonArrayWriter(stream: NodeJS.WriteStream) {
  let first = true;
  const write = async (text: string) => {
    if (stream.destroyed || stream.write(text)) return;
    await new Promise<void>((resolve) => {
      const done = () => {
        for (const event of ['drain', 'close', 'error']) stream.off(event, done);
        resolve();
      };
      for (const event of ['drain', 'close', 'error']) stream.once(event, done);
    });
  };
  return {
    write: (rows: Record<string, unknown>[]) => {
      if (!rows.length) return;
      const text = rows.map((row) => `\n  ${JSON.stringify(row, null, 2).replaceAll('\n', '\n  ')}`).join(',');
      const chunk = `${first ? '[' : ','}${text}`;
      first = false;
      return write(chunk);
    },
    end: () => write(first ? '[]\n' : '\n]\n'),
  };
}

/**
 * A subscription renamed in the file is a new one: the old one would go on exporting, into the same table
 * or bucket, with nothing in the log naming it (the same for one removed from the file).
 */
function warnOfUnlisted(logger: Logger, runtime: JobRuntime): void {
  if (runtime.reconciled.notInFile.length)
    logger.warn(
      { subscriptions: runtime.reconciled.notInFile },
      'subscriptions of the data directory that the job file does not list (removed or renamed in it, or created through the API) go on receiving messages and exporting; delete the ones no longer wanted through the API (orderly serve --data-dir)',
    );
}

/** Invalid job files (JobConfigError) and arguments, and names the job does not have: exit 2. */
function isUsageError(e: unknown): boolean {
  return e instanceof OrderlyError && (e.code === 'INVALID_ARGUMENT' || e.code === 'NOT_FOUND');
}

/** `:publish` to `topic` (a full name) on a running job's REST endpoint; Google's JSON errors become exceptions. */
async function publishOverRest(endpoint: string, topic: string, messages: MessageInput[], authToken?: string): Promise<string[]> {
  const url = `http://${endpoint}/v1/projects/${encodeURIComponent(projectOf(topic))}/topics/${encodeURIComponent(shortId(topic))}:publish`;
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(authToken ? { authorization: `Bearer ${authToken}` } : {}) },
    body: JSON.stringify({
      messages: messages.map((m) => ({
        data: Buffer.from(m.data ?? '').toString('base64'),
        attributes: m.attributes,
        orderingKey: m.orderingKey,
      })),
    }),
  }).catch((e: unknown) => {
    const cause = (e as { cause?: Error }).cause;
    throw new Error(`the running job's endpoint ${endpoint} cannot be reached: ${cause?.message ?? (e as Error).message}`, { cause: e });
  });
  const body = (await res.json()) as { messageIds?: string[]; error?: { message: string; status?: string } };
  if (res.ok) return body.messageIds!;
  const message = body.error?.message ?? `HTTP ${res.status}`;
  // As the core's own errors: a message refused (400) fails its line, a missing topic the whole file.
  if (body.error?.status === 'INVALID_ARGUMENT' || body.error?.status === 'NOT_FOUND') throw new OrderlyError(body.error.status, message);
  throw new Error(`${url}: ${message}`);
}

/** Opens the job's data directory without starting exports, runs `fn`, and always closes it again. */
async function withJob<T>(job: JobConfig, fn: (runtime: JobRuntime) => Promise<T>, mode: Exclude<JobMode, 'run'> = 'inspect'): Promise<T> {
  const { JobRuntime } = await import('../job/job-runtime.js');
  const runtime = await JobRuntime.start(job, await createLogger(), { mode });
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

/**
 * Signals that stop a job with its drain. SIGHUP too: Node's default for it ends the process at once (a
 * closed terminal, a supervisor's hang-up), leaving open files unfinished and the lock file behind, and a
 * running job has nothing to reload (it does not reread its file).
 */
const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/**
 * Ends a process stopped by SIGHUP (the job stopped, its lock released) by the signal's default action, so
 * its parent sees it end by the signal. An exit would abort instead when the terminal has hung up: Node
 * restores the terminal's modes at exit and asserts on the EIO the hung-up terminal answers.
 */
function endByHangUp(): void {
  process.kill(process.pid, 'SIGHUP');
}

type StopSignal = (typeof STOP_SIGNALS)[number];

/**
 * Listens for the stop signals from now on, before the job starts: opening a store and connecting
 * exports can take seconds, and a signal then (Ctrl-C while it starts, a supervisor's stop) met Node's
 * default handler, which ended the process at once, with nothing logged and no drain. A signal received
 * while starting stops the job once it has started. `until` resolves with the signal, or 'failure' when
 * the job fails on its own (then the process ends with exit code 1).
 */
function watchStopSignals(logger: Logger): { until: (runtime: JobRuntime) => Promise<StopSignal | 'failure'> } {
  let started = false;
  const received = new Promise<StopSignal>((resolve) => {
    for (const signal of STOP_SIGNALS)
      process.once(signal, () => {
        if (!started) logger.info({ signal }, 'stop signal received while starting; stopping once started');
        resolve(signal);
      });
  });
  return {
    until: (runtime) => {
      started = true;
      // Signal listeners do not keep a process alive: a job with nothing else pending (no export, endpoint or
      // metrics, only pull subscriptions) ended at once, exit code 13, its lock left behind.
      const release = holdProcess();
      return Promise.race([received, runtime.failure.then(() => 'failure' as const)]).finally(release);
    },
  };
}
