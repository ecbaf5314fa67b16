import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { registerBuiltInConnectors } from '../../connectors/index.js';
import { DEFAULT_IDLE_TIMEOUT_SECONDS } from '../api/endpoint-limits.js';
import { checkExposure } from '../api/exposure.js';
import { getConnector, exportSection } from '../connector/registry.js';
import { OrderlyError } from '../core/errors.js';
import { resourceName } from '../core/names.js';
import { normalizeSubscription, type SubscriptionInput } from '../core/subscription-config.js';

/**
 * The job file: one YAML (or JSON) document declaring where data lives, the object-storage connection,
 * the topics and the subscriptions, with Pub/Sub's own field names. Unknown keys are errors.
 */
const duration = z.union([z.number().nonnegative(), z.string().regex(/^\d+(\.\d+)?(ms|s|m|h|d)?$/, 'a duration like "300s" or "5m"')]);
const labels = z.record(z.string(), z.string());

const subscription = z.strictObject({
  name: z.string(),
  topic: z.string(),
  ackDeadlineSeconds: z.number().int().optional(),
  messageRetentionDuration: duration.optional(),
  retainAckedMessages: z.boolean().optional(),
  enableMessageOrdering: z.boolean().optional(),
  filter: z.string().optional(),
  deadLetterPolicy: z.strictObject({ deadLetterTopic: z.string(), maxDeliveryAttempts: z.number().int().optional() }).optional(),
  retryPolicy: z.strictObject({ minimumBackoff: duration.optional(), maximumBackoff: duration.optional() }).optional(),
  enableExactlyOnceDelivery: z.boolean().optional(),
  expirationPolicy: z.strictObject({ ttl: duration.nullable().optional() }).optional(),
  pushConfig: z.strictObject({ pushEndpoint: z.string(), attributes: labels.optional() }).optional(),
  // The export sections are validated by their connectors (which know every field and range).
  bigqueryConfig: z.record(z.string(), z.unknown()).optional(),
  cloudStorageConfig: z.record(z.string(), z.unknown()).optional(),
  exportConfig: z.looseObject({ connector: z.string() }).optional(),
  labels: labels.optional(),
});

export const jobSchema = z.strictObject({
  projectId: z.string().regex(/^[a-z][a-z0-9-]{4,28}[a-z0-9]$/, 'a Pub/Sub project id (6-30 lowercase letters, digits, "-")').default('orderly-local'),
  dataDir: z.string().default('./orderly-data'),
  durability: z.enum(['fsync', 'process']).default('fsync'),
  duckdb: z.strictObject({ path: z.string(), init: z.array(z.string()).default([]) }).optional(),
  objectStorage: z
    .strictObject({
      endpoint: z.string().optional(),
      region: z.string().optional(),
      accessKeyId: z.string().optional(),
      secretAccessKey: z.string().optional(),
      forcePathStyle: z.boolean().optional(),
      /** Start an S3 server (s3rver) on 127.0.0.1 inside Orderly, storing under dataDir: no external service. */
      embedded: z.boolean().default(false),
      buckets: z.array(z.string()).default([]),
    })
    .optional(),
  metrics: z.strictObject({ host: z.string().default('127.0.0.1'), port: z.number().int().min(0).max(65535).default(9464) }).optional(),
  /** The Pub/Sub v1 endpoint (gRPC and REST) that `orderly run` serves; `orderly serve` always does. */
  endpoint: z
    .strictObject({
      host: z.string().default('127.0.0.1'),
      port: z.number().int().min(0).max(65535).default(8085),
      /** Binding anything but loopback needs this and an authToken. */
      allowRemote: z.boolean().default(false),
      /** Bearer token every call must carry; write `${ORDERLY_TOKEN}` rather than the token itself. */
      authToken: z.string().optional(),
      idleTimeoutSeconds: z.number().min(1).max(3600).default(DEFAULT_IDLE_TIMEOUT_SECONDS),
    })
    .optional(),
  /** Where push subscriptions may deliver (see docs/configuration.md). */
  push: z.strictObject({ allowLinkLocal: z.boolean().default(false) }).default({ allowLinkLocal: false }),
  topics: z.array(z.strictObject({ name: z.string(), labels: labels.optional() })).default([]),
  subscriptions: z.array(subscription).default([]),
});

export type JobConfig = z.infer<typeof jobSchema> & { file: string };

export class JobConfigError extends OrderlyError {
  constructor(
    readonly file: string,
    readonly problems: string[],
  ) {
    super('INVALID_ARGUMENT', `${file}: ${problems.length} problem${problems.length === 1 ? '' : 's'}\n${problems.map((p) => `  ${p}`).join('\n')}`);
  }
}

/** Reads, substitutes `${ENV}` references, validates everything (all errors at once) and resolves paths. */
export function loadJob(file: string, env: NodeJS.ProcessEnv = process.env): JobConfig {
  registerBuiltInConnectors();
  let raw: unknown;
  try {
    const text = readFileSync(file, 'utf8');
    raw = file.endsWith('.json') ? JSON.parse(text) : parseYaml(text);
  } catch (e) {
    throw new JobConfigError(file, [`cannot read: ${(e as Error).message}`]);
  }
  const problems: string[] = [];
  const substituted = substituteEnv(raw, env, '', problems);
  const parsed = jobSchema.safeParse(substituted ?? {});
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      if (issue.code === 'unrecognized_keys') {
        for (const key of issue.keys) problems.push(`${formatPath([...issue.path, key])}: unknown key (a typo? see docs/configuration.md)`);
      } else problems.push(`${formatPath(issue.path)}: ${issue.message}`);
    }
    throw new JobConfigError(file, problems);
  }
  const job = parsed.data;
  const topicNames = new Set(job.topics.map((t) => t.name));
  job.topics.forEach((t, i) => check(problems, `topics[${i}]`, () => resourceName('topics', t.name, job.projectId, 'name')));
  job.subscriptions.forEach((s, i) => {
    const at = `subscriptions[${i}]`;
    check(problems, at, () => resourceName('subscriptions', s.name, job.projectId, 'name'));
    if (!topicNames.has(s.topic)) problems.push(`${at}.topic: no topic "${s.topic}" in topics`);
    const dlt = s.deadLetterPolicy?.deadLetterTopic;
    if (dlt && !topicNames.has(dlt)) problems.push(`${at}.deadLetterPolicy.deadLetterTopic: no topic "${dlt}" in topics`);
    check(problems, at, () => {
      const spec = normalizeSubscription(s as SubscriptionInput, (t, field) => resourceName('topics', t, job.projectId, field));
      const section = exportSection(spec);
      if (section) getConnector(section.connector).parseConfig(section.config);
      if (spec.bigqueryConfig && !job.duckdb) problems.push(`${at}.bigqueryConfig: needs the job's duckdb.path`);
    });
  });
  if (job.endpoint) check(problems, 'endpoint', () => checkExposure(job.endpoint!, { allowRemote: 'endpoint.allowRemote', authToken: 'endpoint.authToken' }));
  if (problems.length) throw new JobConfigError(file, problems);
  const base = dirname(resolve(file));
  job.dataDir = resolve(base, job.dataDir);
  if (job.duckdb) job.duckdb.path = resolve(base, job.duckdb.path);
  return { ...job, file: resolve(file) };
}

/** Field errors from the core and the connectors start with the field, relative to `at`. */
function check(problems: string[], at: string, fn: () => void): void {
  try {
    fn();
  } catch (e) {
    const message = (e as Error).message;
    problems.push((e as { field?: string }).field ? `${at}.${message}` : `${at}: ${message}`);
  }
}

function substituteEnv(value: unknown, env: NodeJS.ProcessEnv, path: string, problems: string[]): unknown {
  if (typeof value === 'string') {
    return value.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_, name: string) => {
      const v = env[name];
      if (v === undefined) problems.push(`${path || '(root)'}: environment variable ${name} is not set`);
      return v ?? '';
    });
  }
  if (Array.isArray(value)) return value.map((v, i) => substituteEnv(v, env, `${path}[${i}]`, problems));
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, substituteEnv(v, env, path ? `${path}.${k}` : k, problems)]));
  }
  return value;
}

function formatPath(path: PropertyKey[]): string {
  return path.reduce<string>((acc, p) => (typeof p === 'number' ? `${acc}[${p}]` : acc ? `${acc}.${String(p)}` : String(p)), '') || '(root)';
}
