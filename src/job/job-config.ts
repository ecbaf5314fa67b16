import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { LineCounter, parseDocument } from 'yaml';
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

/**
 * Exports that read existing subscriptions of a remote Pub/Sub v1 endpoint instead of the embedded core:
 * Google Cloud Pub/Sub (the default; Application Default Credentials), or any compatible endpoint by
 * host. Any number of workers (`orderly run` processes, on one or many machines) run the same job; Pub/Sub
 * spreads the subscription's keys over them.
 */
const remoteExport = z.strictObject({
  /** An existing subscription: a bare id (in remote.projectId) or `projects/<p>/subscriptions/<id>`. */
  subscription: z.string().min(1),
  /** The export needs per-key order: refused, at start, if the remote subscription has ordering off. */
  enableMessageOrdering: z.boolean().default(false),
  bigqueryConfig: z.record(z.string(), z.unknown()).optional(),
  cloudStorageConfig: z.record(z.string(), z.unknown()).optional(),
  exportConfig: z.looseObject({ connector: z.string() }).optional(),
});

const remote = z.strictObject({
  /** `host:port` of a compatible endpoint (another `orderly serve`), reached as PUBSUB_EMULATOR_HOST is; unset: Google Cloud Pub/Sub. */
  endpoint: z.string().regex(/^[^\s/:]+:\d+$/, 'host:port, e.g. "10.0.0.5:8085"').optional(),
  /** The remote project (default: the job's projectId). */
  projectId: z.string().optional(),
  /** Bearer token of an `orderly serve` started with one; write `${ORDERLY_TOKEN}` rather than the token. */
  authToken: z.string().optional(),
  /** This worker's id (default: --worker-id, ORDERLY_WORKER_ID, else <host>-<pid>). */
  workerId: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, '1-64 letters, digits, ".", "_" or "-"').optional(),
  /** The most messages and payload bytes one worker holds unacked per export (its share of the backlog). */
  flowControl: z
    .strictObject({ maxMessages: z.number().int().min(100).max(1_000_000).optional(), maxBytes: z.number().int().min(1024 * 1024).optional() })
    .optional(),
  /** How long a held message's lease is extended (a file open, an upload), in minutes. */
  maxExtensionMinutes: z.number().min(1).max(24 * 60).default(60),
  /** StreamingPull streams per export and worker. */
  streams: z.number().int().min(1).max(16).default(2),
  exports: z.array(remoteExport).min(1),
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
  remote: remote.optional(),
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

/**
 * A job file is a page of settings; the cap keeps a huge or endless file (a 38 MB one took 25 s and 1.9 GB
 * to accept) from being read at all.
 */
export const MAX_JOB_FILE_BYTES = 1024 * 1024;
/** Aliases a job file may expand: enough for shared blocks, far too few for an exponential "billion laughs". */
const MAX_YAML_ALIASES = 100;

/** Reads, substitutes `${ENV}` references, validates everything (all errors at once) and resolves paths. */
export function loadJob(file: string, env: NodeJS.ProcessEnv = process.env): JobConfig {
  registerBuiltInConnectors();
  const raw = readJobDocument(file);
  const problems: string[] = [];
  const substituted = substituteEnv(raw, env, '', problems);
  const parsed = jobSchema.safeParse(substituted);
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
  if (job.remote) checkRemote(job, problems);
  if (job.endpoint) check(problems, 'endpoint', () => checkExposure(job.endpoint!, { allowRemote: 'endpoint.allowRemote', authToken: 'endpoint.authToken' }));
  if (problems.length) throw new JobConfigError(file, problems);
  const base = dirname(resolve(file));
  job.dataDir = resolve(base, job.dataDir);
  if (job.duckdb) job.duckdb.path = resolve(base, job.duckdb.path);
  return { ...job, file: resolve(file) };
}

/** A remote job runs as a fleet worker: only remote exports, each with one export section its connector accepts. */
function checkRemote(job: z.infer<typeof jobSchema>, problems: string[]): void {
  if (job.topics.length || job.subscriptions.length) {
    problems.push('remote: a job that exports from a remote Pub/Sub runs as a fleet worker; put local topics and subscriptions in another job file');
  }
  if (job.objectStorage?.embedded) {
    problems.push('objectStorage.embedded: each worker would run its own S3 server; remote exports need object storage every worker reaches (endpoint:)');
  }
  job.remote!.exports.forEach((e, i) => {
    const at = `remote.exports[${i}]`;
    const sections = (['bigqueryConfig', 'cloudStorageConfig', 'exportConfig'] as const).filter((k) => e[k] !== undefined);
    if (sections.length !== 1) {
      problems.push(`${at}: needs exactly one of bigqueryConfig, cloudStorageConfig, exportConfig${sections.length ? `, got ${sections.join(' and ')}` : ''}`);
      return;
    }
    check(problems, at, () => {
      const section = exportSection({ bigqueryConfig: e.bigqueryConfig, cloudStorageConfig: e.cloudStorageConfig, exportConfig: e.exportConfig })!;
      getConnector(section.connector).parseConfig(section.config);
    });
    if (e.bigqueryConfig && !job.duckdb) problems.push(`${at}.bigqueryConfig: needs the job's duckdb.path`);
  });
  const names = job.remote!.exports.map((e) => (e.subscription.startsWith('projects/') ? e.subscription : `projects/${job.remote!.projectId ?? job.projectId}/subscriptions/${e.subscription}`));
  names.forEach((n, i) => {
    if (names.indexOf(n) !== i) problems.push(`remote.exports[${i}].subscription: ${n} is exported twice; one export per remote subscription`);
  });
}

/**
 * The file's one document as plain data, or a JobConfigError naming what is wrong with the file itself:
 * unreadable, too large, empty, not YAML/JSON, not a mapping, or an alias that contains itself.
 */
function readJobDocument(file: string): Record<string, unknown> {
  const fail = (problem: string): never => {
    throw new JobConfigError(file, [problem]);
  };
  let text: string;
  try {
    text = readCapped(file);
  } catch (e) {
    if (e instanceof JobConfigError) throw e;
    return fail(`cannot read: ${(e as Error).message}`);
  }
  if (!text.replace(/^\uFEFF/, '').trim()) fail('the file is empty; a job file is a mapping of settings (see docs/configuration.md)');
  let value: unknown;
  if (file.endsWith('.json')) {
    try {
      value = JSON.parse(text);
    } catch (e) {
      fail(`not valid JSON: ${(e as Error).message}`);
    }
  } else {
    // Positions from a LineCounter rather than prettyErrors' multi-line excerpts: one problem, one line.
    const lineCounter = new LineCounter();
    const doc = parseDocument(text, { prettyErrors: false, lineCounter });
    const found = [...doc.errors, ...doc.warnings];
    if (found.length) {
      throw new JobConfigError(
        file,
        found.map((p) => {
          const { line, col } = lineCounter.linePos(p.pos[0]);
          return `line ${line}, column ${col}: not valid YAML: ${p.message}`;
        }),
      );
    }
    try {
      value = doc.toJS({ maxAliasCount: MAX_YAML_ALIASES });
    } catch (e) {
      const message = (e as Error).message;
      fail(/resource exhaustion/.test(message) ? `YAML aliases expand too far (over ${MAX_YAML_ALIASES} alias uses); write the values out` : `not valid YAML: ${message}`);
    }
  }
  if (value === null || value === undefined) fail('the file holds no settings (only comments or null); a job file is a mapping of settings');
  if (typeof value !== 'object' || Array.isArray(value)) fail(`the document is ${Array.isArray(value) ? 'a list' : `a ${typeof value}`}, not a mapping of settings (projectId, topics, subscriptions, ...)`);
  const shape = treeProblem(value, '', new Set());
  if (shape) fail(shape);
  return value as Record<string, unknown>;
}

/** Reads at most MAX_JOB_FILE_BYTES; a larger regular file is refused from its size, without reading it. */
function readCapped(file: string): string {
  const limit = MAX_JOB_FILE_BYTES;
  const tooLarge = (size: string) => new JobConfigError(file, [`the file ${size}; a job file may have at most ${limit} bytes (1 MiB)`]);
  const fd = openSync(file, 'r');
  try {
    const stat = fstatSync(fd);
    if (stat.isDirectory()) throw new Error('it is a directory');
    if (stat.isFile() && stat.size > limit) throw tooLarge(`is ${stat.size} bytes`);
    // Pipes and devices have no size: read one byte past the limit to tell.
    const buffer = Buffer.alloc(limit + 1);
    let length = 0;
    for (let n; length < buffer.length && (n = readSync(fd, buffer, length, buffer.length - length, null)) > 0; ) length += n;
    if (length > limit) throw tooLarge(`has more than ${limit} bytes`);
    return buffer.toString('utf8', 0, length);
  } finally {
    closeSync(fd);
  }
}

/** Settings nest a few levels deep; far deeper is a hostile file (and would exhaust the stack of every later walk). */
const MAX_DEPTH = 32;

/**
 * The first reason the document is not a plain tree of settings: a value that contains itself (YAML anchors
 * can build cycles, which every later walk would follow forever) or nesting past MAX_DEPTH.
 */
function treeProblem(value: unknown, path: string, ancestors: Set<object>): string | undefined {
  if (!value || typeof value !== 'object') return undefined;
  if (ancestors.has(value)) return `${path || '(root)'}: a YAML alias that contains itself (a cycle); a job file must be a tree`;
  if (ancestors.size >= MAX_DEPTH) return `${path}: nested deeper than ${MAX_DEPTH} levels`;
  ancestors.add(value);
  const entries: [string, unknown][] = Array.isArray(value) ? value.map((v, i) => [`${path}[${i}]`, v]) : Object.entries(value).map(([k, v]) => [path ? `${path}.${k}` : k, v]);
  for (const [at, v] of entries) {
    const found = treeProblem(v, at, ancestors);
    if (found) return found;
  }
  ancestors.delete(value);
  return undefined;
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
