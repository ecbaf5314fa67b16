import { z } from 'zod';
import { lazyConnector } from '../../src/connector/lazy-connector.js';
import type { ConnectorFactory } from '../../src/connector/registry.js';
import type { SettingsSection } from '../../src/connector/settings-section.js';
import { parseObjectStorageConfig, type ObjectStorageConfig } from './config.js';
import { s3EndpointProblem } from './s3-endpoint.js';

const objectStorageSettings = z.strictObject({
  endpoint: z
    .string()
    .optional()
    .superRefine((endpoint, ctx) => {
      // Empty is unset (an unset variable substituted), as s3Connection reads it.
      const problem = endpoint ? s3EndpointProblem(endpoint) : undefined;
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    }),
  region: z.string().optional(),
  accessKeyId: z.string().optional(),
  secretAccessKey: z.string().optional(),
  forcePathStyle: z.boolean().optional(),
  idleTimeoutSeconds: z.number().int().min(1).max(3600).optional(),
  /** Start an S3 server (s3rver) on 127.0.0.1 inside Orderly, storing under dataDir: no external service. */
  embedded: z.boolean().default(false),
  buckets: z.array(z.string()).default([]),
});

/**
 * The S3/MinIO connection: `objectStorage:` in the job file (else the standard environment variables), or
 * `embedded: true` for an S3 server inside Orderly. Connectors get the connection as `settings.objectStorage`.
 */
const objectStorageSection: SettingsSection<z.infer<typeof objectStorageSettings>> = {
  key: 'objectStorage',
  schema: objectStorageSettings,
  async open({ embedded, buckets, ...connection }, { dataDir, readOnly }) {
    if (!embedded) return { settings: { objectStorage: connection } };
    const s3 = await (await import('./embedded-s3.js')).startEmbeddedS3(dataDir, buckets, { readOnly });
    return { settings: { objectStorage: s3.settings }, close: () => s3.close() };
  },
};

/**
 * What a Parquet export runs with where the job file's memory section does not say (ExportMemory). The
 * runner's budget stays the default's: its files roll at a quarter of it, and at 10,000 they were half the
 * size, for ~4 MiB less at the drain's median, and the drain's start peaked higher in 3 of 6 runs.
 */
const PARQUET_MEMORY = { windowMessages: 10_000, heapGrowthPercent: 30 };

/** `cloudStorageConfig` subscriptions: rolling files on S3/MinIO. */
export const objectStorageConnector: ConnectorFactory<ObjectStorageConfig, z.infer<typeof objectStorageSettings>> = {
  name: 'object-storage',
  parseConfig: parseObjectStorageConfig,
  settings: objectStorageSection,
  // A Parquet file is encoded by DuckDB in this process (parquet-file.ts), beside the heap and the payloads
  // read ahead: a 1M-message Parquet drain peaked at 271-275 MiB with the general defaults and 238-250
  // with these, started beside it (docs/benchmarks.md § Memory). Text and Avro exports keep the defaults.
  memory: (config) => (config.format.kind === 'parquet' ? PARQUET_MEMORY : {}),
  counters: {
    objectsWritten: { metric: 'orderly_objects_written_total', help: 'Objects committed to object storage' },
    bytesUploaded: { metric: 'orderly_bytes_uploaded_total', help: 'Bytes uploaded to object storage' },
    uploadRetries: { metric: 'orderly_upload_retries_total', help: 'Object uploads that failed and will be retried' },
  },
  create: (config, context) => lazyConnector(async () => new (await import('./object-writer.js')).ObjectStorageWriter(config, context)),
  async load(config) {
    await import('./object-writer.js');
    if (config.format.kind === 'parquet') await import('./parquet-file.js');
  },
  audit: async (target) => (await import('./audit.js')).auditExport(target),
  queryView: async (target) => (await import('./query-view.js')).parquetView(target),
};
