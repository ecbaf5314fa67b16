import { rmSync } from 'node:fs';
import { registerBuiltInConnectors } from '../../connectors/index.js';
import { startPubsubEndpoint, type EndpointOptions } from '../api/endpoint.js';
import { ExportManager } from '../connector/export-manager.js';
import { PubSubCore } from '../core/pubsub-core.js';
import { closeDuckDb, duckDbLockHolder, queryDuckDb } from '../duckdb/database.js';
import type { Logger } from '../log.js';
import { SqliteStore } from '../store/sqlite-store.js';
import { startEmbeddedS3, type EmbeddedS3 } from './embedded-s3.js';
import type { JobConfig } from './job-config.js';
import { acquireLock } from './job-lock.js';
import { serveMetrics } from './metrics.js';
import { reconcile, type ReconcileReport } from './reconcile.js';
import { remoteExportsOf } from './remote-job.js';
import { resolveWorkerId, sweepGoneWorkers, workerDir } from './worker.js';

/**
 * A running job: the store, the embedded S3 server if asked for, the DuckDB database, the reconciled
 * topics and subscriptions, an export runner per export subscription, and the metrics endpoint.
 */
export class JobRuntime {
  private constructor(
    readonly job: JobConfig,
    readonly core: PubSubCore,
    readonly exports: ExportManager,
    readonly reconciled: ReconcileReport,
    readonly objectStorage: Record<string, unknown> | undefined,
    private readonly cleanups: (() => Promise<void> | void)[],
    readonly metricsUrl?: string,
    /** The port the Pub/Sub endpoint listens on, when the job serves one. */
    readonly endpointPort?: number,
    /** For a job that exports from a remote Pub/Sub: this process's worker id. */
    readonly workerId?: string,
  ) {}

  /**
   * `withExports: false` opens everything but starts no export (status, query, publish);
   * `serveMetrics` (run, serve) also serves the metrics and, if the job has one, the Pub/Sub endpoint;
   * `endpointFlags` names its exposure settings as the user gave them (CLI flags) in error messages.
   * A job with `remote:` runs as one worker of a fleet (`workerId`: see resolveWorkerId): its lock, local
   * store and spill files live in its own folder under the data directory, so any number of workers run
   * the same job file on one machine.
   */
  static async start(
    job: JobConfig,
    logger: Logger,
    options: { withExports?: boolean; serveMetrics?: boolean; endpointFlags?: EndpointOptions['flags']; workerId?: string } = {},
  ): Promise<JobRuntime> {
    registerBuiltInConnectors();
    const cleanups: (() => Promise<void> | void)[] = [];
    const undo = async () => {
      for (const c of cleanups.reverse()) await c();
    };
    try {
      const workerId = job.remote ? resolveWorkerId(options.workerId, job.remote.workerId) : undefined;
      let dataDir = job.dataDir;
      if (workerId) {
        sweepGoneWorkers(job.dataDir);
        dataDir = workerDir(job.dataDir, workerId);
        // Its folder holds nothing once it stopped (spill files are uploaded or come again): removed last.
        const dir = dataDir;
        cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
      }
      cleanups.push(acquireLock(dataDir));
      let s3: EmbeddedS3 | undefined;
      if (job.objectStorage?.embedded) {
        s3 = await startEmbeddedS3(dataDir, job.objectStorage.buckets);
        cleanups.push(() => s3!.close());
      }
      const { embedded: _e, buckets: _b, ...connection } = job.objectStorage ?? { embedded: false, buckets: [] };
      const objectStorage = s3 ? s3.settings : job.objectStorage ? connection : undefined;
      if (job.duckdb) {
        const path = job.duckdb.path;
        try {
          for (const sql of job.duckdb.init) await queryDuckDb(path, sql);
        } catch (e) {
          // A fleet's DuckDB file has one writer: another worker holds it (and ran these); this one waits as a standby.
          const holder = workerId ? duckDbLockHolder(e) : undefined;
          if (holder === undefined) throw e;
          logger.info({ duckdb: path, holder }, 'the DuckDB file is held by another worker; its init statements are left to it');
        }
        cleanups.push(() => closeDuckDb(path));
      }
      const core = await PubSubCore.open({
        store: SqliteStore.open(dataDir, { durability: job.durability }),
        projectId: job.projectId,
        push: { allowLinkLocal: job.push.allowLinkLocal },
      });
      cleanups.push(() => core.close());
      const reconciled = await reconcile(core, job);
      const exports = new ExportManager({
        core,
        settings: { dataDir, duckdbPath: job.duckdb?.path, objectStorage },
        logger,
        remote: workerId ? remoteExportsOf(job, workerId) : undefined,
        runner: job.remote?.flowControl ? { maxOutstandingMessages: job.remote.flowControl.maxMessages, maxOutstandingBytes: job.remote.flowControl.maxBytes } : undefined,
      });
      cleanups.push(() => exports.stop());
      if (options.withExports !== false) await exports.start();
      let metricsUrl: string | undefined;
      if (options.serveMetrics && job.metrics) {
        const server = await serveMetrics(core, exports, job.metrics.host, job.metrics.port);
        metricsUrl = server.url;
        cleanups.push(() => server.close());
      }
      let endpointPort: number | undefined;
      if (options.serveMetrics && job.endpoint) {
        // Stopped first (pushed last): no new calls while the exports drain.
        const endpoint = await startPubsubEndpoint(core, { ...job.endpoint, flags: options.endpointFlags, logger });
        endpointPort = endpoint.port;
        cleanups.push(() => endpoint.close());
      }
      if (metricsUrl || endpointPort !== undefined) {
        // Tell other commands where to reach this job (status reads /status, publish the endpoint).
        acquireLock(dataDir, { metrics: metricsUrl, endpoint: endpointPort === undefined ? undefined : `${job.endpoint!.host}:${endpointPort}` });
      }
      return new JobRuntime(job, core, exports, reconciled, objectStorage, cleanups, metricsUrl, endpointPort, workerId);
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

