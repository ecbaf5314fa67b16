import { registerBuiltInConnectors } from '../../connectors/index.js';
import { startPubsubEndpoint, type EndpointOptions } from '../api/endpoint.js';
import { ExportManager } from '../connector/export-manager.js';
import { PubSubCore } from '../core/pubsub-core.js';
import { closeDuckDb, queryDuckDb, setDuckDbLimits } from '../duckdb/database.js';
import type { Logger } from '../log.js';
import { SqliteStore } from '../store/sqlite-store.js';
import { startEmbeddedS3, type EmbeddedS3 } from './embedded-s3.js';
import type { JobConfig } from './job-config.js';
import { acquireLock } from './job-lock.js';
import { serveMetrics } from './metrics.js';
import { reconcile, type ReconcileReport } from './reconcile.js';

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
    /** Resolves if the job cannot go on (the store turned out to be unusable): the process should stop. */
    readonly failure: Promise<Error>,
    readonly metricsUrl?: string,
    /** The port the Pub/Sub endpoint listens on, when the job serves one. */
    readonly endpointPort?: number,
  ) {}

  /**
   * `withExports: false` opens everything but starts no export (status, query, publish);
   * `serveMetrics` (run, serve) also serves the metrics and, if the job has one, the Pub/Sub endpoint;
   * `endpointFlags` names its exposure settings as the user gave them (CLI flags) in error messages.
   */
  static async start(
    job: JobConfig,
    logger: Logger,
    options: { withExports?: boolean; serveMetrics?: boolean; endpointFlags?: EndpointOptions['flags'] } = {},
  ): Promise<JobRuntime> {
    registerBuiltInConnectors();
    const cleanups: (() => Promise<void> | void)[] = [];
    const undo = async () => {
      for (const c of cleanups.reverse()) await c();
    };
    try {
      cleanups.push(acquireLock(job.dataDir));
      setDuckDbLimits({ memoryLimit: `${Math.max(1, Math.floor(job.memory.duckdb / 1024 / 1024))}MiB`, threads: job.memory.duckdbThreads });
      let s3: EmbeddedS3 | undefined;
      if (job.objectStorage?.embedded) {
        s3 = await startEmbeddedS3(job.dataDir, job.objectStorage.buckets);
        cleanups.push(() => s3!.close());
      }
      const { embedded: _e, buckets: _b, ...connection } = job.objectStorage ?? { embedded: false, buckets: [] };
      const objectStorage = s3 ? s3.settings : job.objectStorage ? connection : undefined;
      if (job.duckdb) {
        const path = job.duckdb.path;
        for (const sql of job.duckdb.init) await queryDuckDb(path, sql);
        cleanups.push(() => closeDuckDb(path));
      }
      let reportFailure!: (error: Error) => void;
      const failure = new Promise<Error>((resolve) => (reportFailure = resolve));
      const core = await PubSubCore.open({
        store: SqliteStore.open(job.dataDir, { durability: job.durability }),
        memory: { payloadBytes: job.memory.payloadBytes, messagesPerSubscription: job.memory.messagesPerSubscription, messagesPerKey: job.memory.messagesPerKey },
        onStoreFatal: (error) => {
          logger.fatal({ error: error.message }, 'the store is unusable; stopping');
          reportFailure(error);
        },
        projectId: job.projectId,
        push: { allowLinkLocal: job.push.allowLinkLocal },
      });
      cleanups.push(() => core.close());
      const reconciled = await reconcile(core, job);
      const exports = new ExportManager({
        core,
        settings: { dataDir: job.dataDir, duckdbPath: job.duckdb?.path, objectStorage },
        logger,
        runner: { maxOutstandingMessages: job.memory.exportMessages, maxOutstandingBytes: job.memory.exportBytes },
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
        acquireLock(job.dataDir, { metrics: metricsUrl, endpoint: endpointPort === undefined ? undefined : `${job.endpoint!.host}:${endpointPort}` });
      }
      return new JobRuntime(job, core, exports, reconciled, objectStorage, cleanups, failure, metricsUrl, endpointPort);
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
