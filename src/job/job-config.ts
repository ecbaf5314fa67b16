import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { LineCounter, parseDocument } from 'yaml';
import { z } from 'zod';
import { registerBuiltInConnectors } from '../../connectors/index.js';
import { DEFAULT_IDLE_TIMEOUT_SECONDS } from '../api/endpoint-limits.js';
import { checkExposure } from '../api/exposure.js';
import { getConnector, exportSection, settingsSections } from '../connector/registry.js';
import { remoteSubscriptionName } from '../connector/sources/remote-names.js';
import type { SettingsSection, StandardIssue } from '../connector/settings-section.js';
import { InvalidArgumentError, OrderlyError, UnknownFieldError } from '../core/errors.js';
import { DEFAULT_MEMORY } from '../core/memory-budget.js';
import { checkLabels } from '../core/labels.js';
import { checkProject, resourceName } from '../core/names.js';
import { applyTopicInput, topicSchemaField, type TopicInput } from '../core/topic-config.js';
import { normalizeSubscription } from '../core/subscription-config.js';
import { checkJobSchemas, jobSchemaEntry, jobSchemaName, jobTopicSchemaSettings, type JobSchema } from './job-schemas.js';
import { importPlugins, unloadedPlugins } from './plugins.js';

/**
 * The job file: one YAML (or JSON) document declaring where data lives, the plugins to load, the topics
 * and the subscriptions, with Pub/Sub's own field names, and the connectors' own settings sections
 * (`duckdb:`, `objectStorage:`, ...: see SettingsSection). Unknown keys are errors.
 */
const duration = z.union([z.number().nonnegative(), z.string().regex(/^\d+(\.\d+)?(ms|s|m|h|d)?$/, 'a duration like "300s" or "5m"')]);
const labels = z.record(z.string(), z.string());
const BYTE_UNITS: Record<string, number> = { '': 1, b: 1, kb: 1e3, mb: 1e6, gb: 1e9, kib: 1024, mib: 1024 ** 2, gib: 1024 ** 3 };
const TOO_LARGE = `at most ${Number.MAX_SAFE_INTEGER.toLocaleString('en-US')} bytes`;
/**
 * A size in bytes, at least `min`: a number, or a string like "64MiB", "512MB", "2GiB". The bounds apply to
 * the size a string stands for too: "0MiB" or a 400-digit string must not reach the job as 0 or Infinity.
 */
const byteSize = (min = 1) =>
  z
    .union(
      [
        z.number().int(),
        z
          .string()
          .regex(/^\d+(\.\d+)?\s*([kmg]i?b|b)?$/i, 'a size like 64MiB, 512MB or a number of bytes')
          .transform((text) => {
            const [, amount, unit] = /^(\d+(?:\.\d+)?)\s*([a-z]*)$/i.exec(text)!;
            return Math.round(Number(amount) * BYTE_UNITS[unit!.toLowerCase()]!);
          }),
      ],
      { error: 'a size like 64MiB, 512MB or a number of bytes' },
    )
    .pipe(
      z
        .number({ error: TOO_LARGE })
        .min(min, `at least ${min === 1 ? '1 byte' : `${min.toLocaleString('en-US')} bytes`}`)
        .max(Number.MAX_SAFE_INTEGER, TOO_LARGE),
    );
/** Below this DuckDB cannot commit 1 KB rows or write a Parquet file of them (8 MiB: out of memory at either). */
const MIN_DUCKDB_MEMORY = 16 * 1024 * 1024;

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
  pushConfig: z
    .strictObject({
      pushEndpoint: z.string(),
      attributes: labels.optional(),
      /** Payload unwrapping: the body is the message data, metadata as headers when writeMetadata. */
      noWrapper: z.strictObject({ writeMetadata: z.boolean().optional() }).optional(),
    })
    .optional(),
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
  endpoint: z
    .string()
    .regex(/^[^\s/:]+:\d+$/, 'host:port, e.g. "10.0.0.5:8085"')
    .optional(),
  /** The remote project (default: the job's projectId). */
  projectId: z.string().optional(),
  /** Bearer token of an `orderly serve` started with one; write `${ORDERLY_TOKEN}` rather than the token. */
  authToken: z.string().optional(),
  /** This worker's id, unless --worker-id or ORDERLY_WORKER_ID gives one (none of them: <host>-<pid>). */
  workerId: z
    .string()
    .regex(/^[A-Za-z0-9._-]{1,64}$/, '1-64 letters, digits, ".", "_" or "-"')
    .optional(),
  /** The most messages and payload bytes one worker holds unacked per export (its share of the backlog). */
  flowControl: z
    .strictObject({
      maxMessages: z.number().int().min(100).max(1_000_000).optional(),
      maxBytes: z
        .number()
        .int()
        .min(1024 * 1024)
        .optional(),
    })
    .optional(),
  /** How long a held message's lease is extended (a file open, an upload), in minutes. */
  maxExtensionMinutes: z
    .number()
    .min(1)
    .max(24 * 60)
    .default(60),
  /** StreamingPull streams per export and worker. */
  streams: z.number().int().min(1).max(16).default(2),
  /**
   * Ordered exports: after this many seconds without a new delivery, a worker finalizes what it holds (an
   * open file) and acks it. Pub/Sub sends a key's next messages only once its earlier ones are acked, so
   * an open file that no more messages can fill would otherwise hold its keys back until it rolls by
   * itself (maxDuration, up to 10 minutes). 0: files roll only by their own limits.
   */
  idleFlushSeconds: z.number().min(0).max(600).default(2),
  exports: z.array(remoteExport).min(1),
});

export const jobSchema = z.strictObject({
  projectId: z
    .string()
    .regex(/^[a-z][a-z0-9-]{4,28}[a-z0-9]$/, {
      error: (issue) =>
        `must be a Pub/Sub project id (6-30 lowercase letters, digits and "-", starting with a letter, not ending with "-"), got ${JSON.stringify(issue.input)}`,
    })
    .default('orderly-local'),
  dataDir: z.string().default('./orderly-data'),
  durability: z.enum(['fsync', 'process']).default('fsync'),
  /** What a running job keeps in memory (docs/configuration.md#memory); the defaults keep it within ~300 MiB. */
  memory: z
    .strictObject({
      payloadBytes: byteSize().default(64 * 1024 * 1024),
      /** Unset: the core's 20,000, or less for an export whose connector asks for less (ExportMemory). */
      messagesPerSubscription: z.number().int().min(100).max(10_000_000).optional(),
      messagesPerKey: z.number().int().min(1).max(10_000_000).default(1_000),
      exportBytes: byteSize().default(64 * 1024 * 1024),
      /** Unset: 20,000, or what the export's connector asks for (ExportMemory). */
      exportMessages: z.number().int().min(100).max(10_000_000).optional(),
      duckdb: byteSize(MIN_DUCKDB_MEMORY).default(128 * 1024 * 1024),
      duckdbTables: byteSize(MIN_DUCKDB_MEMORY).default(32 * 1024 * 1024),
      duckdbThreads: z.number().int().min(1).max(256).default(2),
      duckdbTableThreads: z.number().int().min(1).max(256).default(1),
      /** Unset: see HeapGrowth (60, or 300 in a process that only serves). */
      heapGrowthPercent: z.number().int().min(10).max(300).optional(),
    })
    .default({
      payloadBytes: 64 * 1024 * 1024,
      messagesPerKey: 1_000,
      exportBytes: 64 * 1024 * 1024,
      duckdb: 128 * 1024 * 1024,
      duckdbTables: 32 * 1024 * 1024,
      duckdbThreads: 2,
      duckdbTableThreads: 1,
    }),
  /** Modules that register connectors (package names, or paths relative to the job file), loaded first. */
  plugins: z.array(z.string().min(1)).default([]),
  metrics: z
    .strictObject({
      host: z.string().default('127.0.0.1'),
      port: z.number().int().min(0).max(65535).default(9464),
      /** Binding anything but loopback needs this and an authToken, as the endpoint's does. */
      allowRemote: z.boolean().default(false),
      /** Bearer token /metrics and /status then require; write `${ORDERLY_METRICS_TOKEN}` rather than the token itself. */
      authToken: z.string().optional(),
    })
    .optional(),
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
  /** Where push subscriptions may deliver, and when an unanswered push request shows in status (see docs/configuration.md). */
  push: z
    .strictObject({
      allowLinkLocal: z.boolean().default(false),
      stallSeconds: z.number().int().min(1).max(3600).default(30),
    })
    .default({ allowLinkLocal: false, stallSeconds: 30 }),
  topics: z
    .array(
      z.strictObject({
        name: z.string(),
        labels: labels.optional(),
        /** Pub/Sub's topic retention (10 min–31 days): acked messages stay this long, for seeks back. */
        messageRetentionDuration: duration.optional(),
        /** The topic's schema (one of `schemas`); left out, the topic keeps what the API gave it. */
        schemaSettings: jobTopicSchemaSettings.optional(),
      }),
    )
    .default([]),
  /** SchemaService schemas, created, or given a new revision when their definition changes (docs/schemas.md). */
  schemas: z.array(jobSchemaEntry).default([]),
  subscriptions: z.array(subscription).default([]),
  remote: remote.optional(),
});

/**
 * A validated job: the job's own settings, the connectors' settings sections present in the file (validated
 * by their sections, by key), and the file it came from (absolute).
 */
export type JobConfig = Omit<z.infer<typeof jobSchema>, 'schemas'> & {
  schemas: JobSchema[];
  file: string;
  sections: Readonly<Record<string, unknown>>;
};

/** A job with nothing but a data directory (`orderly serve` without a job file). */
export function bareJob(dataDir: string): JobConfig {
  return { ...jobSchema.parse({ dataDir }), schemas: [], file: '(none)', sections: {} };
}

export class JobConfigError extends OrderlyError {
  constructor(
    readonly file: string,
    readonly problems: string[],
  ) {
    super(
      'INVALID_ARGUMENT',
      `${file}: ${problems.length} problem${problems.length === 1 ? '' : 's'}\n${problems.map((p) => `  ${p}`).join('\n')}`,
    );
  }
}

/**
 * A job file is a page of settings; the cap keeps a huge or endless file (a 38 MB one took 25 s and 1.9 GB
 * to accept) from being read at all.
 */
export const MAX_JOB_FILE_BYTES = 1024 * 1024;
/** Aliases a job file may expand: enough for shared blocks, far too few for an exponential "billion laughs". */
const MAX_YAML_ALIASES = 100;

/** How a job file's subscriptions are checked. */
export interface JobChecks {
  /**
   * Every subscription by all the rules creating it applies (`orderly validate`). Otherwise (every command
   * that opens the data directory) a subscription may keep what an older Orderly stored before a rule was
   * tightened (exactly-once beside push or an export, a filter read by older rules): the data directory
   * says whether it did, and creating one applies every rule there.
   */
  asCreated?: boolean;
}

/**
 * Loads a job file and the plugins it lists (`plugins:`) first, so their connectors and settings sections
 * are known when the rest is validated. What the command line does.
 */
export async function loadJobWithPlugins(file: string, env: NodeJS.ProcessEnv = process.env, checks: JobChecks = {}): Promise<JobConfig> {
  const raw = readJobDocument(file);
  // Built-ins first: a plugin that takes a built-in's name is then refused at its import, named as the
  // plugin at fault, instead of refusing the built-in afterwards with an error naming neither.
  registerBuiltInConnectors();
  const plugins = substituteEnv(raw.plugins, { env, references: new Map(), typed: new Set() }, 'plugins', []);
  if (Array.isArray(plugins) && plugins.every((p) => typeof p === 'string')) {
    const failed = await importPlugins(plugins, dirname(resolve(file)));
    if (failed.length) throw new JobConfigError(file, failed);
  }
  return parseJob(raw, file, env, checks);
}

/**
 * Reads, substitutes `${ENV}` references, validates everything (all errors at once) and resolves paths.
 * Imports no plugin: a job that lists plugins is refused unless they are loaded (see loadJobWithPlugins).
 */
export function loadJob(file: string, env: NodeJS.ProcessEnv = process.env, checks: JobChecks = {}): JobConfig {
  return parseJob(readJobDocument(file), file, env, checks);
}

/**
 * The job in `raw` (the document `loadJob` read from `file`), validated; paths resolved against the file's
 * folder. A value that is one whole `${NAME}` reference (`port: ${PORT}`) is a string, as the file cannot
 * say otherwise, unless the setting refuses a string there and the variable holds a number or a boolean:
 * then it is that number or boolean, and the file is checked again with it.
 */
export function parseJob(
  raw: Record<string, unknown>,
  file: string,
  env: NodeJS.ProcessEnv = process.env,
  checks: JobChecks = {},
): JobConfig {
  const references: Scalars = new Map();
  const parse = (typed: ReadonlySet<string>) => parseSubstituted(raw, file, { env, references, typed }, checks);
  try {
    return parse(new Set());
  } catch (e) {
    if (!(e instanceof JobConfigError)) throw e;
    const candidates = [...references.keys()].filter((path) => e.problems.some((p) => p.startsWith(`${path}: `)));
    if (!candidates.length) throw e;
    try {
      return parse(new Set(candidates));
    } catch (again) {
      if (!(again instanceof JobConfigError)) throw again;
      // A setting that takes no number or boolean keeps the string, and the problem the string has
      // (`projectId: ${P}` with P=12345: the project id rule, not "expected string, received number").
      const wantsString = (path: string) => again.problems.some((p) => p.startsWith(`${path}: `) && /received (number|boolean)$/.test(p));
      const typed = candidates.filter((path) => !wantsString(path));
      if (typed.length === candidates.length) throw again;
      return parse(new Set(typed));
    }
  }
}

function parseSubstituted(raw: Record<string, unknown>, file: string, substitution: Substitution, checks: JobChecks): JobConfig {
  registerBuiltInConnectors();
  const problems: string[] = [];
  const refused: RefusedReference[] = [];
  const substituted = substituteEnv(raw, { ...substitution, refused }, '', problems) as Record<string, unknown>;
  // A value whose reference was refused is said so once: not checked again as the text or the empty string it became.
  const notRefused = (problem: string) => !refused.some(({ path }) => problem.startsWith(`${path}: `));
  const sections = settingsSections();
  const ownKeys = Object.keys(jobSchema.shape);
  const clash = sections.find((s) => ownKeys.includes(s.key));
  if (clash)
    throw new OrderlyError(
      'INVALID_ARGUMENT',
      `a connector declares the job file section "${clash.key}", which is one of the job's own keys`,
    );
  // The job's own keys go to its schema (which calls any other key unknown), each section to its connector's.
  const own = Object.fromEntries(Object.entries(substituted).filter(([k]) => !sections.some((s) => s.key === k)));
  const parsed = jobSchema.safeParse(own);
  const unknownKeys: PropertyKey[][] = [];
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      problems.push(...formatIssue(issue));
      if (issue.code === 'unrecognized_keys') unknownKeys.push(...issue.keys.map((key) => [...issue.path, key]));
    }
  }
  const values: Record<string, unknown> = {};
  for (const section of sections) {
    if (substituted[section.key] === undefined) continue;
    const sectionProblems: string[] = [];
    values[section.key] = validateSection(section, substituted[section.key], sectionProblems);
    problems.push(...sectionProblems.filter(notRefused));
  }
  // A plugin not loaded yet leaves its sections unknown and its connectors missing: say why first.
  const base = dirname(resolve(file));
  const listed = Array.isArray(substituted.plugins) ? (substituted.plugins as unknown[]) : [];
  problems.unshift(...unloadedPlugins(listed, base).map(({ index, problem }) => `plugins[${index}]: ${problem}`));
  // The checks beyond the file's shape run on every part that has the right shape once its unknown keys
  // are set aside, so one run lists every problem: a typo does not hide a range error, nor a bad id both.
  const present = new Set(sections.filter((section) => substituted[section.key] !== undefined).map((section) => section.key));
  const { definitions } = checkSettings(
    withoutPaths(own, [...unknownKeys, ...refused.map(({ at }) => at)]),
    present,
    base,
    problems,
    checks,
  );
  if (own.remote && (substituted.objectStorage as { embedded?: unknown } | undefined)?.embedded === true) {
    problems.push(
      'objectStorage.embedded: each worker would run its own S3 server; remote exports need object storage every worker reaches (endpoint:)',
    );
  }
  if (!parsed.success || problems.length) throw new JobConfigError(file, problems);
  const job = parsed.data;
  job.dataDir = resolve(base, job.dataDir);
  for (const section of sections) {
    if (section.key in values && section.resolvePaths)
      values[section.key] = section.resolvePaths(values[section.key], (path) => resolve(base, path));
  }
  const schemas = job.schemas.map(({ name, type }, i) => ({ name, type, definition: definitions[i]! }));
  return { ...job, schemas, file: resolve(file), sections: values };
}

const topic = jobSchema.shape.topics.unwrap().element;

/**
 * A topic entry as the core takes it. The file states the topic's labels and retention whole: one it
 * leaves out is cleared. Its schemaSettings, when given, are whole too; left out, the topic keeps those the
 * API gave it (a topic's schema may be managed there). `projectId`: the project of a bare schema id.
 */
export function jobTopicInput(t: z.infer<typeof topic>, projectId: string): TopicInput {
  const input = topicBasics(t);
  if (t.schemaSettings)
    input.schemaSettings = { ...t.schemaSettings, schema: jobSchemaName(t.schemaSettings.schema, projectId, 'schemaSettings.schema') };
  return input;
}

/** The labels and retention a topic entry asks for, checked as the core checks them (ranges, label rules). */
export function jobTopicSettings(t: z.infer<typeof topic>): { labels: Record<string, string>; messageRetentionDuration?: number } {
  // Without schemaSettings, whose check needs the data directory's schemas: the schema check is never reached.
  const { labels, settings } = applyTopicInput({ labels: {}, settings: {} }, topicBasics(t), () => ({}) as never);
  return { labels, messageRetentionDuration: settings.messageRetentionDuration };
}

function topicBasics(t: z.infer<typeof topic>): TopicInput {
  return { labels: t.labels ?? {}, messageRetentionDuration: t.messageRetentionDuration ?? null };
}

/**
 * The checks zod's shapes cannot make — ids, references between entries, ranges, export sections,
 * exposure — on every part of `doc` (the job's own keys) that has the right shape. `sections`: the
 * connectors' settings sections the file has.
 */
function checkSettings(
  doc: Record<string, unknown>,
  sections: ReadonlySet<string>,
  base: string,
  problems: string[],
  checks: JobChecks,
): { definitions: (string | undefined)[] } {
  const part = <T>(schema: z.ZodType<T>, value: unknown): T | undefined => {
    const r = schema.safeParse(value);
    return r.success ? r.data : undefined;
  };
  const projectId = part(jobSchema.shape.projectId, doc.projectId) ?? 'orderly-local';
  const list = (value: unknown): unknown[] => (Array.isArray(value) ? value : []);
  /** The topics' full names: a reference by id and one by full name find the same topic. */
  const topicNames = new Set<string>();
  // A name that does not resolve is kept as written (its own entry reports why), so it still matches itself.
  const fullTopicName = (name: string) => {
    try {
      return resourceName('topics', name, projectId);
    } catch {
      return name;
    }
  };
  const listedOnce = uniqueNames(projectId);
  const schemas = checkJobSchemas(list(doc.schemas), base, projectId, problems);
  list(doc.topics).forEach((raw, i) => {
    const name = (raw as { name?: unknown } | null)?.name;
    // Named even when the rest of the entry has problems: its subscriptions are not reported as dangling.
    if (typeof name === 'string') {
      topicNames.add(fullTopicName(name));
      check(problems, `topics[${i}]`, () => listedOnce('topics', name, i));
    }
    const t = part(topic, raw);
    if (t) check(problems, `topics[${i}]`, () => jobTopicSettings(t));
    const ref = t?.schemaSettings?.schema;
    if (ref !== undefined)
      check(problems, `topics[${i}]`, () => {
        const field = 'schemaSettings.schema';
        if (!schemas.names.has(jobSchemaName(ref, projectId, field)))
          throw new InvalidArgumentError(field, `no schema "${ref}" in schemas`);
      });
  });
  list(doc.subscriptions).forEach((raw, i) => {
    const at = `subscriptions[${i}]`;
    const name = (raw as { name?: unknown } | null)?.name;
    if (typeof name === 'string') check(problems, at, () => listedOnce('subscriptions', name, i));
    const s = part(subscription, raw);
    if (!s) return;
    if (!topicNames.has(fullTopicName(s.topic))) problems.push(`${at}.topic: no topic "${s.topic}" in topics`);
    const dlt = s.deadLetterPolicy?.deadLetterTopic;
    if (dlt && !topicNames.has(fullTopicName(dlt))) problems.push(`${at}.deadLetterPolicy.deadLetterTopic: no topic "${dlt}" in topics`);
    if (s.labels) check(problems, at, () => checkLabels(s.labels));
    // Every problem of the subscription's own settings, then of its export section: one does not hide the other.
    const checked = checkEach(problems, at, '', s as unknown as Record<string, unknown>, (settings) =>
      normalizeSubscription(
        settings as unknown as typeof s,
        (t, field) => resourceName('topics', t, projectId, field),
        checks.asCreated ? undefined : 'job-file',
      ),
    );
    check(problems, at, () => {
      // An export section left empty (`bigqueryConfig: {}`, `bucket: null`) is what turns an API subscription
      // back to pull; in a job file it is a mistake, checked by its connector (which names what is missing).
      const section =
        (checked && exportSection(checked)) ??
        exportSection({ bigqueryConfig: s.bigqueryConfig, cloudStorageConfig: s.cloudStorageConfig });
      if (!section) return;
      checkExportSection(problems, at, section, sections);
    });
  });
  // Its exports are checked even when another of its fields is invalid (that one the schema reports).
  const remoteSection = partWithout(jobSchema.shape.remote, doc.remote);
  if (remoteSection) checkRemote(remoteSection, doc, projectId, sections, problems);
  const memory = part(jobSchema.shape.memory, doc.memory);
  // A key's share is part of the window: a larger one would be the window, not what the file says. (Only
  // a share the file gives: the default's is the window when the window is smaller.)
  const givenShare = (doc.memory as { messagesPerKey?: unknown } | undefined)?.messagesPerKey !== undefined;
  const window = memory?.messagesPerSubscription ?? DEFAULT_MEMORY.messagesPerSubscription;
  if (memory && givenShare && memory.messagesPerKey > window)
    problems.push(`memory.messagesPerKey: at most memory.messagesPerSubscription (${window}), got ${memory.messagesPerKey}`);
  const endpoint = part(jobSchema.shape.endpoint, doc.endpoint);
  if (endpoint)
    check(problems, 'endpoint', () => checkExposure(endpoint, { allowRemote: 'endpoint.allowRemote', authToken: 'endpoint.authToken' }));
  // /status names every subscription and its hot ordering keys: off loopback on the same terms.
  const metrics = part(jobSchema.shape.metrics, doc.metrics);
  if (metrics)
    check(problems, 'metrics', () => checkExposure(metrics, { allowRemote: 'metrics.allowRemote', authToken: 'metrics.authToken' }));
  return { definitions: schemas.definitions };
}

/**
 * Checks a topic's or subscription's name, and that no other entry of its list names the same resource
 * (a bare id and its full name included): two entries would be merged into one at start.
 */
function uniqueNames(projectId: string): (kind: 'topics' | 'subscriptions', name: string, i: number) => void {
  const seen = new Map<string, number>();
  return (kind, name, i) => {
    const full = resourceName(kind, name, projectId, 'name');
    const first = seen.get(full);
    if (first === undefined) seen.set(full, i);
    else throw new InvalidArgumentError('name', `${JSON.stringify(name)} is also ${kind}[${first}]'s: each is listed once`);
  };
}

/** A subscription's (or remote export's) export section: the job settings its connector needs, and the section itself. */
function checkExportSection(
  problems: string[],
  at: string,
  section: { connector: string; field: string; config: unknown },
  sections: ReadonlySet<string>,
): void {
  const factory = getConnector(section.connector);
  if (factory.requiresSettings && factory.settings && !sections.has(factory.settings.key))
    problems.push(`${at}.${section.field}: needs the job's ${factory.requiresSettings}`);
  refuseOutputOnly(problems, at, section);
  checkSection(problems, at, section.field, (config) => factory.parseConfig(config), section.config);
}

/**
 * `state` is output only in Pub/Sub's bigqueryConfig and cloudStorageConfig: the API ignores it in a request,
 * as Google's does (clients send back what they read), but in a job file it would be a setting that does
 * nothing, whatever it says. (A third-party connector's `exportConfig` may have a `state` of its own.)
 */
function refuseOutputOnly(problems: string[], at: string, section: { field: string; config: unknown }): void {
  if (section.field !== 'exportConfig' && section.config && typeof section.config === 'object' && 'state' in section.config)
    problems.push(`${at}.${section.field}.state: output only (the sink's state, which orderly status shows), not a setting`);
}

/** A connector's section: every unknown field is reported and set aside, and the rest is checked too. */
function checkSection(problems: string[], at: string, field: string, parse: (config: unknown) => unknown, config: unknown): void {
  if (!config || typeof config !== 'object') {
    parse(config);
    return;
  }
  checkEach(problems, at, `${field}.`, config as Record<string, unknown>, parse);
}

/**
 * Runs `parse` over `doc` until it passes, listing each problem it throws: after each, the field it names
 * (`prefix` + its path in `doc`) is set aside and the rest checked again, so a typo does not hide a range
 * error. A problem naming no field of `doc` (one that is missing) ends the checking. The result, if it passed.
 */
function checkEach<T>(
  problems: string[],
  at: string,
  prefix: string,
  doc: Record<string, unknown>,
  parse: (doc: Record<string, unknown>) => T,
): T | undefined {
  let rest = doc;
  const reported = new Set<string>();
  for (let round = 0; round < MAX_SECTION_ROUNDS; round++) {
    try {
      return parse(rest);
    } catch (e) {
      if (!(e instanceof InvalidArgumentError)) {
        problems.push(`${at}: ${(e as Error).message}`);
        return undefined;
      }
      // Set aside, a field given as null is missing: that problem is said once.
      if (reported.has(e.field)) return undefined;
      reported.add(e.field);
      // Checked against a field set aside, the value met that field's default, not what the file says.
      if (!e.comparedWith.some((f) => reported.has(f))) problems.push(`${at}.${e.message}`);
      const path = e instanceof UnknownFieldError ? e.key : e.field.startsWith(prefix) ? e.field.slice(prefix.length).split('.') : [];
      if (!path.length || !hasPath(rest, path)) return undefined;
      rest = withoutPaths(rest, [path]);
    }
  }
  return undefined;
}

/** Whether `doc` has a value at `path`. */
function hasPath(doc: Record<string, unknown>, path: string[]): boolean {
  let o: unknown = doc;
  for (const p of path) {
    if (!o || typeof o !== 'object' || !Object.hasOwn(o, p)) return false;
    o = (o as Record<string, unknown>)[p];
  }
  return true;
}

/**
 * What a section's schema makes of it with its invalid fields left out (their problems are the schema's
 * to report), so that what depends on the rest can still be checked; undefined if nothing valid is left.
 */
function partWithout<T>(schema: z.ZodType<T>, value: unknown): T | undefined {
  let rest = value;
  for (let round = 0; round < MAX_SECTION_ROUNDS; round++) {
    const parsed = schema.safeParse(rest);
    if (parsed.success) return parsed.data;
    if (!rest || typeof rest !== 'object' || Array.isArray(rest)) return undefined;
    const doc = rest as Record<string, unknown>;
    const paths = parsed.error.issues
      .flatMap((issue) => (issue.code === 'unrecognized_keys' ? issue.keys.map((k) => [...issue.path, k]) : [issue.path]))
      .map((path) => path.map(String))
      .filter((path) => path.length && hasPath(doc, path));
    if (!paths.length) return undefined;
    rest = withoutPaths(doc, paths);
  }
  return undefined;
}

/** More problems than this in one section: the rest of the section is not checked. */
const MAX_SECTION_ROUNDS = 50;

/** A copy of `doc` without the values at `paths`. */
function withoutPaths(doc: Record<string, unknown>, paths: PropertyKey[][]): Record<string, unknown> {
  if (!paths.length) return doc;
  const copy = structuredClone(doc);
  for (const path of paths) {
    const parent = path
      .slice(0, -1)
      .reduce<unknown>((o, p) => (o && typeof o === 'object' ? (o as Record<PropertyKey, unknown>)[p] : undefined), copy);
    if (parent && typeof parent === 'object') delete (parent as Record<PropertyKey, unknown>)[path[path.length - 1]!];
  }
  return copy;
}

/** A section's settings as its schema (or parse function) returns them; its problems, with their paths, go to `problems`. */
function validateSection(section: SettingsSection, raw: unknown, problems: string[]): unknown {
  const { schema } = section;
  if (typeof schema === 'function') {
    try {
      return schema(raw);
    } catch (e) {
      const message = (e as Error).message;
      problems.push((e as { field?: string }).field ? `${section.key}.${message}` : `${section.key}: ${message}`);
      return undefined;
    }
  }
  const result = schema['~standard'].validate(raw);
  if (result instanceof Promise)
    throw new OrderlyError(
      'INVALID_ARGUMENT',
      `the schema of the job file section "${section.key}" validates asynchronously; sections need a synchronous schema`,
    );
  if (result.issues) for (const issue of result.issues) problems.push(...formatIssue(issue, [section.key]));
  return result.issues ? undefined : result.value;
}

/** One schema issue as problem lines: its path in the file, then what is wrong; each unknown key a line of its own. */
function formatIssue(issue: StandardIssue & { code?: string; keys?: string[] }, at: PropertyKey[] = []): string[] {
  const path = [...at, ...(issue.path ?? []).map((p) => (typeof p === 'object' ? p.key : p))];
  if (issue.code === 'unrecognized_keys' && issue.keys) {
    return issue.keys.map((key) => `${formatPath([...path, key])}: unknown key (a typo? see docs/configuration.md)`);
  }
  return [`${formatPath(path)}: ${issue.message}`];
}

/**
 * A remote job runs as a fleet worker: only remote exports, each with one export section its connector
 * accepts (and the settings section the connector needs), each remote subscription once.
 */
function checkRemote(
  remote: NonNullable<z.infer<typeof jobSchema>['remote']>,
  doc: Record<string, unknown>,
  projectId: string,
  sections: ReadonlySet<string>,
  problems: string[],
): void {
  const count = (value: unknown) => (Array.isArray(value) ? value.length : 0);
  if (count(doc.topics) || count(doc.subscriptions) || count(doc.schemas)) {
    problems.push(
      'remote: a job that exports from a remote Pub/Sub runs as a fleet worker; put local topics, subscriptions and schemas in another job file',
    );
  }
  remote.exports.forEach((e, i) => {
    const at = `remote.exports[${i}]`;
    const given = (['bigqueryConfig', 'cloudStorageConfig', 'exportConfig'] as const).filter((k) => e[k] !== undefined);
    if (given.length !== 1) {
      problems.push(
        `${at}: needs exactly one of bigqueryConfig, cloudStorageConfig, exportConfig${given.length ? `, got ${given.join(' and ')}` : ''}`,
      );
      return;
    }
    // Orderly does not read a remote topic's schema, so an export asking for it could write nothing.
    const schemaField = topicSchemaField(e);
    if (schemaField)
      problems.push(`${at}.${schemaField}: a remote topic's schema is not read; leave useTopicSchema unset for a remote export`);
    check(problems, at, () => {
      const section = exportSection(e)!;
      checkExportSection(problems, at, section, sections);
    });
    // A name the remote would refuse (NOT_FOUND or INVALID_ARGUMENT at every worker's start, retried) is the file's mistake.
    check(problems, at, () => resourceName('subscriptions', e.subscription, remote.projectId ?? projectId, 'subscription'));
  });
  if (remote.projectId !== undefined) check(problems, 'remote', () => checkProject(remote.projectId!, 'projectId'));
  const names = remote.exports.map((e) => remoteSubscriptionName(e.subscription, remote.projectId ?? projectId));
  names.forEach((n, i) => {
    if (names.indexOf(n) !== i)
      problems.push(`remote.exports[${i}].subscription: ${n} is exported twice; one export per remote subscription`);
  });
}

/**
 * The file's one document as plain data, or a JobConfigError naming what is wrong with the file itself:
 * unreadable, too large, empty, not YAML/JSON, not a mapping, or an alias that contains itself.
 */
export function readJobDocument(file: string): Record<string, unknown> {
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
    const doc = parseDocument(text, { prettyErrors: false, lineCounter, merge: true });
    const found = [...doc.errors, ...doc.warnings].sort((a, b) => a.pos[0] - b.pos[0]);
    if (found.length) {
      // Past a broken token the parser reports every later token as unexpected too (one `${PORT}` inside
      // `{ }` made 137 "problems"): stop at the first such error and say how many more followed.
      const cut = found.findIndex((p) => CASCADING_YAML_ERRORS.has(p.code));
      const shown = cut === -1 ? found : found.slice(0, cut + 1);
      const rest = found.length - shown.length;
      throw new JobConfigError(
        file,
        shown.map((p, i) => {
          const { line, col } = lineCounter.linePos(p.pos[0]);
          const after = i === cut && rest ? ` (then ${rest} more errors, most likely caused by this one)` : '';
          return `line ${line}, column ${col}: not valid YAML: ${p.message}${after}`;
        }),
      );
    }
    try {
      value = doc.toJS({ maxAliasCount: MAX_YAML_ALIASES });
    } catch (e) {
      const message = (e as Error).message;
      fail(
        /resource exhaustion/.test(message)
          ? `YAML aliases expand too far (over ${MAX_YAML_ALIASES} alias uses); write the values out`
          : `not valid YAML: ${message}`,
      );
    }
  }
  if (value === null || value === undefined)
    fail('the file holds no settings (only comments or null); a job file is a mapping of settings');
  if (typeof value !== 'object' || Array.isArray(value))
    fail(
      `the document is ${Array.isArray(value) ? 'a list' : `a ${typeof value}`}, not a mapping of settings (projectId, topics, subscriptions, ...)`,
    );
  const shape = treeProblem(value, '', new Set());
  if (shape) fail(shape);
  return value as Record<string, unknown>;
}

/** The YAML parser's errors after which the rest of the text no longer parses as written. */
const CASCADING_YAML_ERRORS = new Set(['UNEXPECTED_TOKEN', 'MISSING_CHAR', 'BAD_INDENT', 'BLOCK_IN_FLOW', 'BAD_SCALAR_START']);

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
    for (let n; length < buffer.length && (n = readSync(fd, buffer, length, buffer.length - length, null)) > 0;) length += n;
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
  const entries: [string, unknown][] = Array.isArray(value)
    ? value.map((v, i) => [`${path}[${i}]`, v])
    : Object.entries(value).map(([k, v]) => [path ? `${path}.${k}` : k, v]);
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

/** By path in the file: the number or boolean a whole `${NAME}` reference's variable holds. */
type Scalars = Map<string, number | boolean>;

interface Substitution {
  env: NodeJS.ProcessEnv;
  /** Filled in: every whole reference whose variable holds a number or a boolean. */
  references: Scalars;
  /** The paths of `references` that are substituted as that number or boolean rather than as a string. */
  typed: ReadonlySet<string>;
  /** Filled in: the values with a reference already reported (a variable not set, a shell form). */
  refused?: RefusedReference[];
}

/** A value with a reference already reported: where it is, as keys and as problems name it. */
interface RefusedReference {
  at: PropertyKey[];
  path: string;
}

function substituteEnv(value: unknown, substitution: Substitution, path: string, problems: string[], at: PropertyKey[] = []): unknown {
  const { env, references, typed } = substitution;
  if (typeof value === 'string') {
    const whole = /^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$/.exec(value)?.[1];
    const scalar = whole === undefined ? undefined : typedScalar(env[whole]);
    if (scalar !== undefined) {
      references.set(path, scalar);
      if (typed.has(path)) return scalar;
    }
    // A shell form (`${NAME:-default}`, `${NAME?}`) is not substituted: kept as text, it became the setting
    // itself (a literal token, key or filename prefix) with nothing saying so.
    let refused = false;
    for (const [reference, inner] of value.matchAll(/\$\{([^}]*)\}/g))
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(inner!)) {
        problems.push(
          `${path || '(root)'}: ${reference} is not a reference Orderly substitutes: only \${NAME} is (letters, digits and _; no default or other shell form)`,
        );
        refused = true;
      }
    const substituted = value.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_, name: string) => {
      const v = env[name];
      if (v === undefined) problems.push(`${path || '(root)'}: environment variable ${name} is not set`);
      refused ||= v === undefined;
      return v ?? '';
    });
    if (refused) substitution.refused?.push({ at, path });
    return substituted;
  }
  if (Array.isArray(value)) return value.map((v, i) => substituteEnv(v, substitution, `${path}[${i}]`, problems, [...at, i]));
  if (value && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [k, substituteEnv(v, substitution, path ? `${path}.${k}` : k, problems, [...at, k])]),
    );
  }
  return value;
}

/** The number or boolean a variable's value spells as YAML would read it unquoted (`8085`, `1.5`, `true`); else undefined. */
function typedScalar(value: string | undefined): number | boolean | undefined {
  if (value === 'true' || value === 'false') return value === 'true';
  return value !== undefined && /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$/.test(value) ? Number(value) : undefined;
}

function formatPath(path: PropertyKey[]): string {
  return (
    path.reduce<string>((acc, p) => (typeof p === 'number' ? `${acc}[${p}]` : acc ? `${acc}.${String(p)}` : String(p)), '') || '(root)'
  );
}
