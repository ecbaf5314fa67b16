import { rmSync } from 'node:fs';
import { registerBuiltInConnectors } from '../../connectors/index.js';
import type { EndpointOptions } from '../api/endpoint.js';
import { isLoopback, localHostPort } from '../api/exposure.js';
import type { ConnectorSettings } from '../connector/connector.js';
import { ExportManager, type ExportManagerOptions } from '../connector/export-manager.js';
import { declaredWindow, settingsSections } from '../connector/registry.js';
import { OrderlyError } from '../core/errors.js';
import { PubSubCore } from '../core/pubsub-core.js';
import { setDuckDbLimits } from '../duckdb/limits.js';
import type { Logger } from '../log.js';
import { SqliteStore } from '../store/sqlite-store.js';
import type { JobConfig } from './job-config.js';
import { ExportStates } from './export-states.js';
import { acquireJobLock, acquireLock } from './job-lock.js';
import { reconcile, type ReconcileReport } from './reconcile.js';
import { remoteExportsOf } from './remote-job.js';
import { leaveWorkerDir, resolveWorkerId, sweepGoneWorkers, workerDir } from './worker.js';
import { HeapGrowth } from './heap-growth.js';
import { readOnlyScratch } from './read-only-scratch.js';

type Cleanup = () => Promise<void> | void;

/**
 * How much of a job a command opens:
 * - `run` (run, serve, the demo): everything, and the exports start;
 * - `inspect` (`query --write`): everything, but no export starts;
 * - `read-only` (audit, read-only queries): as `inspect`, and the settings sections change nothing (see
 *   SectionContext), nor is the data directory reconciled with the file; a data directory that never held
 *   a store is not created: the job opens in a scratch directory, removed at stop (readOnlyScratch);
 * - `store-only` (publish, status): the store, reconciled with the file, and nothing else: no settings
 *   section (no DuckDB database, no embedded S3 server), which each cost ~2 s of a call for nothing used.
 * All but `run` take the data directory's lock briefly rather than waiting for a running job to let it go.
 */
export type JobMode = 'run' | 'inspect' | 'read-only' | 'store-only';

/**
 * A running job: its settings sections opened (an embedded S3 server, the DuckDB database, ...), the store,
 * the reconciled topics and subscriptions, an export runner per export subscription, and the metrics endpoint.
 */
export class JobRuntime {
  private constructor(
    readonly job: JobConfig,
    readonly core: PubSubCore,
    readonly exports: ExportManager,
    /** What reconcile did: nothing when started `readOnly`, which takes the data directory as it stands. */
    readonly reconciled: ReconcileReport,
    /** What every connector of the job is given: the data directory and what the settings sections provide. */
    readonly connectorSettings: ConnectorSettings,
    /** The DuckDB database a settings section names for `orderly query` (e.g. `duckdb.path`). */
    readonly queryDatabase: string | undefined,
    /** Started `readOnly`: the sections changed nothing and hold no database open. */
    readonly readOnly: boolean,
    private readonly cleanups: Cleanup[],
    /** Resolves if the job cannot go on (the store turned out to be unusable): the process should stop. */
    readonly failure: Promise<Error>,
    /** Each export's last sink state, kept in the data directory (what status shows while no job runs). */
    readonly exportStates: ExportStates,
    /** The JavaScript heap's growth limit in effect (memory.heapGrowthPercent, or its default for the mode). */
    readonly heapGrowth: HeapGrowth,
    readonly metricsUrl?: string,
    /** The port the Pub/Sub endpoint listens on, when the job serves one. */
    readonly endpointPort?: number,
    /** For a job that exports from a remote Pub/Sub: this process's worker id. */
    readonly workerId?: string,
  ) {}

  /**
   * `mode`, how much of the job the command opens (JobMode; `run` unless given);
   * `serveMetrics` (run, serve) also serves the metrics and, if the job has one, the Pub/Sub endpoint;
   * `endpointFlags` names its exposure settings as the user gave them (CLI flags) in error messages;
   * `exportRunner` tunes every export runner (batch sizes, budget, flush interval, backoff: tests).
   * A job with `remote:` runs as one worker of a fleet (`workerId`: see resolveWorkerId): its lock, local
   * store and spill files live in its own folder under the data directory, so any number of workers run
   * the same job file on one machine.
   * The job's plugins must be loaded already (loadJobWithPlugins).
   */
  static async start(
    job: JobConfig,
    logger: Logger,
    options: {
      mode?: JobMode;
      serveMetrics?: boolean;
      endpointFlags?: EndpointOptions['flags'];
      exportRunner?: ExportManagerOptions['runner'];
      workerId?: string;
    } = {},
  ): Promise<JobRuntime> {
    registerBuiltInConnectors();
    const mode = options.mode ?? 'run';
    const readOnly = mode === 'read-only';
    const cleanups: Cleanup[] = [];
    const undo = async () => {
      for (const c of cleanups.reverse()) await c();
    };
    try {
      const workerId = job.remote ? resolveWorkerId(options.workerId, job.remote.workerId) : undefined;
      let dataDir = job.dataDir;
      if (workerId) {
        // Gone workers' folders are removed by the commands that may change the data directory.
        if (!readOnly) sweepGoneWorkers(job.dataDir);
        dataDir = workerDir(job.dataDir, workerId);
      }
      const scratch = readOnly ? readOnlyScratch(dataDir) : undefined;
      if (scratch) {
        cleanups.push(() => rmSync(scratch, { recursive: true, force: true }));
        dataDir = scratch;
      }
      // Only once the lock is this process's: a start refused because the worker runs already must not
      // remove that worker's folder on its way out.
      const briefly = mode !== 'run';
      const releaseLock = briefly
        ? acquireLock(dataDir, { briefly })
        : await acquireJobLock(dataDir, { starting: true }, (holder) =>
            logger.info(
              { dataDir, pid: holder.pid },
              'waiting for another orderly command (a query, audit, status or publish) to let the data directory go',
            ),
          );
      cleanups.push(workerId && !scratch ? leaveWorkerDir(dataDir, releaseLock) : releaseLock);
      const heapGrowth = new HeapGrowth(job.memory.heapGrowthPercent, mode === 'run');
      // Before any section opens a DuckDB database (the duckdb section runs its init statements). In a
      // process that runs no export (orderly query), a database file is opened for queries.
      const mib = (bytes: number) => `${Math.max(1, Math.floor(bytes / 1024 / 1024))}MiB`;
      const exporting = mode === 'run';
      setDuckDbLimits({
        memoryLimit: mib(job.memory.duckdb),
        tableMemoryLimit: mib(exporting ? job.memory.duckdbTables : job.memory.duckdb),
        threads: job.memory.duckdbThreads,
        tableThreads: exporting ? job.memory.duckdbTableThreads : job.memory.duckdbThreads,
      });
      const opened = mode === 'store-only' ? { settings: { dataDir } } : await openSections(job, { dataDir, readOnly, logger }, cleanups);
      let reportFailure!: (error: Error) => void;
      const failure = new Promise<Error>((resolve) => (reportFailure = resolve));
      const core = await PubSubCore.open({
        store: SqliteStore.open(dataDir, { durability: job.durability, exports: exporting, upgrade: !readOnly }),
        memory: {
          payloadBytes: job.memory.payloadBytes,
          messagesPerSubscription: job.memory.messagesPerSubscription,
          messagesPerKey: job.memory.messagesPerKey,
          // An export's window from the store's open on, not once its runner attaches: what a subscription
          // read ahead before then (the general window) was held on top until the export drained it. The
          // job's messagesPerSubscription, when set, is every export's window (ExportManager.windowMessages).
          windowOf: job.memory.messagesPerSubscription === undefined ? declaredWindow : undefined,
        },
        onStoreFatal: (error) => {
          logger.fatal({ error: error.message }, 'the store is unusable; stopping');
          reportFailure(error);
        },
        projectId: job.projectId,
        push: { allowLinkLocal: job.push.allowLinkLocal },
        pushStallMs: job.push.stallSeconds * 1000,
      });
      cleanups.push(() => core.close());
      // A read-only query changes nothing: reconciled, an edited file would create subscriptions (which then
      // export, a renamed one into the same table again) and change export sections.
      const reconciled = readOnly ? { created: [], updated: [], unchanged: [], notInFile: [] } : await reconcile(core, job);
      const flowControl = job.remote?.flowControl;
      const exportStates = new ExportStates(dataDir, logger);
      const exports = new ExportManager({
        core,
        settings: opened.settings,
        logger,
        windowMessages: job.memory.messagesPerSubscription,
        runner: {
          maxOutstandingMessages: flowControl?.maxMessages ?? job.memory.exportMessages,
          maxOutstandingBytes: flowControl?.maxBytes ?? job.memory.exportBytes,
          ...options.exportRunner,
        },
        remote: workerId ? remoteExportsOf(job, workerId) : undefined,
        onState: (subscription, uid, state, reason) => exportStates.record(subscription, uid, state, reason),
        onRunnerStart: (memory) => heapGrowth.exporting(memory),
      });
      cleanups.push(() => exports.stop());
      if (exporting) {
        await exports.load();
        await exports.start();
      }
      let metricsUrl: string | undefined;
      if (options.serveMetrics && job.metrics) {
        // Imported here, as the endpoint below: a command that only opens the job (query, status, audit)
        // does not load prom-client, gRPC and the Pub/Sub protos (~0.3 s of every such command's start).
        const { serveMetrics } = await import('./metrics.js');
        const server = await serveMetrics(core, exports, job.metrics.host, job.metrics.port, job.metrics.authToken);
        metricsUrl = server.url;
        cleanups.push(() => server.close());
        // As the endpoint warns of itself: /status names every subscription and its hot ordering keys.
        if (!isLoopback(job.metrics.host))
          logger.warn(
            { host: job.metrics.host, url: server.url },
            'the metrics server (/metrics, /status) is reachable from other machines; every request must carry the bearer token',
          );
      }
      let endpointPort: number | undefined;
      if (options.serveMetrics && job.endpoint) {
        // Stopped first (pushed last): no new calls while the exports drain.
        const { startPubsubEndpoint } = await import('../api/endpoint.js');
        const endpoint = await startPubsubEndpoint(core, { ...job.endpoint, flags: options.endpointFlags, logger });
        endpointPort = endpoint.port;
        cleanups.push(() => endpoint.close());
      }
      if (!briefly) {
        // Tell other commands the job runs, and where to reach it (status reads /status, publish the endpoint).
        acquireLock(dataDir, {
          metrics: metricsUrl,
          endpoint: endpointPort === undefined ? undefined : localHostPort(job.endpoint!.host, endpointPort),
        });
      }
      return new JobRuntime(
        job,
        core,
        exports,
        reconciled,
        opened.settings,
        opened.queryDatabase,
        readOnly,
        cleanups,
        failure,
        exportStates,
        heapGrowth,
        metricsUrl,
        endpointPort,
        workerId,
      );
    } catch (e) {
      await undo();
      throw e;
    }
  }

  /** Drains: exports finish their writes, open files are finalized and acked; then everything closes. */
  async stop(): Promise<void> {
    while (this.cleanups.length) await this.cleanups.pop()!();
  }
}

/**
 * Opens the job's settings sections in registration order, each closed (through `cleanups`) after
 * everything opened later. Without `open`, a section's validated settings are provided under its key.
 */
async function openSections(
  job: JobConfig,
  context: { dataDir: string; readOnly: boolean; logger: Logger },
  cleanups: Cleanup[],
): Promise<{ settings: ConnectorSettings; queryDatabase?: string }> {
  const provided: Record<string, unknown> = {};
  const providedBy = new Map<string, string>();
  let queryDatabase: { path: string; key: string } | undefined;
  for (const section of settingsSections()) {
    if (!(section.key in job.sections)) continue;
    const value = job.sections[section.key];
    const opened = section.open ? await section.open(value, context) : { settings: { [section.key]: value } };
    if (opened.close) cleanups.push(() => opened.close?.());
    for (const [key, setting] of Object.entries(opened.settings)) {
      const other = key === 'dataDir' ? 'the job' : providedBy.get(key);
      if (other)
        throw new OrderlyError(
          'INVALID_ARGUMENT',
          `the job file sections ${section.key} and ${other} both provide the connector setting "${key}"`,
        );
      providedBy.set(key, section.key);
      provided[key] = setting;
    }
    if (opened.queryDatabase !== undefined) {
      if (queryDatabase)
        throw new OrderlyError(
          'INVALID_ARGUMENT',
          `the job file sections ${queryDatabase.key} and ${section.key} both name a database for orderly query`,
        );
      queryDatabase = { path: opened.queryDatabase, key: section.key };
    }
  }
  return { settings: { ...provided, dataDir: context.dataDir }, queryDatabase: queryDatabase?.path };
}
