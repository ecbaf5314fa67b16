import { checkRange, parseDuration, type DurationInput } from './duration.js';
import { FailedPreconditionError, InvalidArgumentError } from './errors.js';
import { parseFilter } from './filter.js';
import { checkPushAttributes } from './push-egress.js';
import { checkServiceAccountEmail } from './service-account.js';

/** A subscription as a caller describes it: Pub/Sub's field names; durations as seconds or `"600s"`. */
export interface SubscriptionInput {
  topic: string;
  ackDeadlineSeconds?: number;
  messageRetentionDuration?: DurationInput;
  retainAckedMessages?: boolean;
  enableMessageOrdering?: boolean;
  filter?: string;
  deadLetterPolicy?: { deadLetterTopic: string; maxDeliveryAttempts?: number } | null;
  retryPolicy?: { minimumBackoff?: DurationInput; maximumBackoff?: DurationInput } | null;
  enableExactlyOnceDelivery?: boolean;
  expirationPolicy?: { ttl?: DurationInput | null } | null;
  pushConfig?: PushConfigInput | null;
  bigqueryConfig?: Record<string, unknown> | null;
  cloudStorageConfig?: Record<string, unknown> | null;
  /** Orderly's own: a third-party export connector by registered name, with its settings. */
  exportConfig?: ({ connector: string } & Record<string, unknown>) | null;
  labels?: Record<string, string>;
}

/** The validated, defaulted form the core works with and the store keeps. Durations in seconds. */
export interface SubscriptionSpec {
  topic: string;
  ackDeadlineSeconds: number;
  messageRetentionDuration: number;
  retainAckedMessages: boolean;
  enableMessageOrdering: boolean;
  filter: string;
  deadLetterPolicy?: { deadLetterTopic: string; maxDeliveryAttempts: number };
  retryPolicy?: { minimumBackoff: number; maximumBackoff: number };
  enableExactlyOnceDelivery: boolean;
  /** ttl in seconds; null = never expires. Kept for API fidelity; Orderly does not delete idle subscriptions. */
  expirationPolicy?: { ttl: number | null };
  pushConfig?: PushConfigSpec;
  bigqueryConfig?: Record<string, unknown>;
  cloudStorageConfig?: Record<string, unknown>;
  exportConfig?: { connector: string } & Record<string, unknown>;
  labels: Record<string, string>;
}

type OptionalField = { [K in keyof SubscriptionSpec]-?: undefined extends SubscriptionSpec[K] ? K : never }[keyof SubscriptionSpec];

/**
 * Every optional section of a spec, cleared. An update merges its patch over the stored spec, so a whole
 * spec given as the patch (a job file's entry) must clear the sections it leaves out: spread it over this.
 * A Record, so a section added to the spec cannot be missed here.
 */
export const CLEARED_SECTIONS: Readonly<Record<OptionalField, null>> = {
  deadLetterPolicy: null,
  retryPolicy: null,
  expirationPolicy: null,
  pushConfig: null,
  bigqueryConfig: null,
  cloudStorageConfig: null,
  exportConfig: null,
};

export interface PushConfigInput {
  pushEndpoint?: string;
  attributes?: Record<string, string>;
  oidcToken?: { serviceAccountEmail?: string; audience?: string } | null;
  noWrapper?: { writeMetadata?: boolean } | null;
}

export interface PushConfigSpec {
  pushEndpoint: string;
  attributes: Record<string, string>;
  /**
   * Stored and returned only: Orderly cannot mint Google-signed OIDC tokens, so push requests carry no
   * Authorization header (docs/api-coverage.md).
   */
  oidcToken?: { serviceAccountEmail: string; audience: string };
  /** Payload unwrapping: the request body is the message data; with writeMetadata, metadata in headers. */
  noWrapper?: { writeMetadata: boolean };
}

export const DEFAULTS = {
  ackDeadlineSeconds: 10,
  messageRetentionDuration: 7 * 86400,
  maxDeliveryAttempts: 5,
  minimumBackoff: 10,
  maximumBackoff: 600,
} as const;

const MIN_RETENTION = 600;
const MAX_RETENTION = 31 * 86400;

/**
 * What a subscription created before a rule was tightened keeps: its filter (read as it was then) and
 * exactly-once beside push or export delivery, as long as a change does not touch them. Refusing them
 * on every later check would leave it impossible to update (the filter cannot change) and stop a job
 * file that describes it from running.
 */
export type Grandfathered = { existing: SubscriptionSpec } | 'job-file';

/**
 * Validates and fills defaults. `resolveTopic` turns a topic reference into its full name. `kept`: the
 * subscription as stored, for a change of an existing one; `'job-file'` when no store is at hand (a
 * job file may describe a subscription created before; creating one applies every rule).
 */
export function normalizeSubscription(
  input: SubscriptionInput,
  resolveTopic: (ref: string, field: string) => string,
  kept?: Grandfathered,
): SubscriptionSpec {
  if (!input || typeof input.topic !== 'string') throw new InvalidArgumentError('topic', 'is required');
  const ack = input.ackDeadlineSeconds ?? DEFAULTS.ackDeadlineSeconds;
  if (!Number.isInteger(ack) || ack < 10 || ack > 600) {
    throw new InvalidArgumentError('ackDeadlineSeconds', `must be an integer between 10 and 600, got ${ack}`);
  }
  const retention = checkRange(
    'messageRetentionDuration',
    parseDuration('messageRetentionDuration', input.messageRetentionDuration ?? DEFAULTS.messageRetentionDuration),
    MIN_RETENTION,
    MAX_RETENTION,
  );
  const filter = input.filter ?? '';
  parseFilter(filter, { stored: kept === 'job-file' || kept?.existing.filter === filter });

  const spec: SubscriptionSpec = {
    topic: resolveTopic(input.topic, 'topic'),
    ackDeadlineSeconds: ack,
    messageRetentionDuration: retention,
    retainAckedMessages: bool('retainAckedMessages', input.retainAckedMessages),
    enableMessageOrdering: bool('enableMessageOrdering', input.enableMessageOrdering),
    filter,
    enableExactlyOnceDelivery: bool('enableExactlyOnceDelivery', input.enableExactlyOnceDelivery),
    labels: { ...(input.labels ?? {}) },
  };

  if (input.deadLetterPolicy) {
    const max = input.deadLetterPolicy.maxDeliveryAttempts ?? DEFAULTS.maxDeliveryAttempts;
    if (!Number.isInteger(max) || max < 5 || max > 100) {
      throw new InvalidArgumentError('deadLetterPolicy.maxDeliveryAttempts', `must be an integer between 5 and 100, got ${max}`);
    }
    if (!input.deadLetterPolicy.deadLetterTopic) throw new InvalidArgumentError('deadLetterPolicy.deadLetterTopic', 'is required');
    spec.deadLetterPolicy = {
      deadLetterTopic: resolveTopic(input.deadLetterPolicy.deadLetterTopic, 'deadLetterPolicy.deadLetterTopic'),
      maxDeliveryAttempts: max,
    };
  }
  if (input.retryPolicy) {
    const min = checkRange(
      'retryPolicy.minimumBackoff',
      parseDuration('retryPolicy.minimumBackoff', input.retryPolicy.minimumBackoff ?? DEFAULTS.minimumBackoff),
      0,
      600,
    );
    const max = checkRange(
      'retryPolicy.maximumBackoff',
      parseDuration('retryPolicy.maximumBackoff', input.retryPolicy.maximumBackoff ?? DEFAULTS.maximumBackoff),
      0,
      600,
    );
    if (max < min)
      throw new InvalidArgumentError('retryPolicy.maximumBackoff', `must not be below minimumBackoff (${min}s), got ${max}s`, [
        'retryPolicy.minimumBackoff',
      ]);
    spec.retryPolicy = { minimumBackoff: min, maximumBackoff: max };
  }
  if (input.expirationPolicy) {
    const ttlInput = input.expirationPolicy.ttl;
    if (ttlInput === undefined || ttlInput === null || ttlInput === '') {
      spec.expirationPolicy = { ttl: null };
    } else {
      const ttl = parseDuration('expirationPolicy.ttl', ttlInput);
      // Each rule said alone: a job file's validator that set a bad retention aside checks the ttl against
      // the default one, which its message must not quote as the file's.
      if (ttl < 86400) throw new InvalidArgumentError('expirationPolicy.ttl', `must be at least 1 day (86400s), got ${ttl}s`);
      if (ttl < retention)
        throw new InvalidArgumentError('expirationPolicy.ttl', `must be at least messageRetentionDuration (${retention}s), got ${ttl}s`, [
          'messageRetentionDuration',
        ]);
      spec.expirationPolicy = { ttl };
    }
  }

  const deliveries = (['pushConfig', 'bigqueryConfig', 'cloudStorageConfig', 'exportConfig'] as const).filter((k) => hasConfig(input[k]));
  if (deliveries.length > 1) {
    throw new InvalidArgumentError(
      deliveries[1]!,
      `at most one of pushConfig, bigqueryConfig, cloudStorageConfig, exportConfig may be set, got ${deliveries.join(' and ')}`,
    );
  }
  if (hasConfig(input.pushConfig)) {
    const endpoint = input.pushConfig!.pushEndpoint ?? '';
    let url: URL;
    try {
      url = new URL(endpoint);
    } catch {
      throw new InvalidArgumentError('pushConfig.pushEndpoint', `must be an http(s) URL, got ${JSON.stringify(endpoint)}`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new InvalidArgumentError('pushConfig.pushEndpoint', `must be an http(s) URL, got ${JSON.stringify(endpoint)}`);
    }
    // They would be sent as an Authorization header and shown back by every read of the subscription.
    if (url.username || url.password) {
      throw new InvalidArgumentError('pushConfig.pushEndpoint', 'must not hold a user name or password (user:password@host)');
    }
    const attributes = input.pushConfig!.attributes ?? {};
    if (typeof attributes !== 'object' || Array.isArray(attributes))
      throw new InvalidArgumentError('pushConfig.attributes', 'must be an object of string values');
    checkPushAttributes(attributes);
    spec.pushConfig = { pushEndpoint: endpoint, attributes: { ...attributes } };
    const { oidcToken, noWrapper } = input.pushConfig!;
    if (oidcToken) {
      const email = checkServiceAccountEmail('pushConfig.oidcToken.serviceAccountEmail', oidcToken.serviceAccountEmail ?? '');
      if (typeof (oidcToken.audience ?? '') !== 'string')
        throw new InvalidArgumentError('pushConfig.oidcToken.audience', 'must be a string');
      spec.pushConfig.oidcToken = { serviceAccountEmail: email, audience: oidcToken.audience ?? '' };
    }
    if (noWrapper) spec.pushConfig.noWrapper = { writeMetadata: bool('pushConfig.noWrapper.writeMetadata', noWrapper.writeMetadata) };
  }
  if (hasConfig(input.bigqueryConfig)) spec.bigqueryConfig = { ...input.bigqueryConfig };
  if (hasConfig(input.cloudStorageConfig)) spec.cloudStorageConfig = { ...input.cloudStorageConfig };
  if (hasConfig(input.exportConfig)) {
    if (typeof input.exportConfig!.connector !== 'string' || !input.exportConfig!.connector) {
      throw new InvalidArgumentError('exportConfig.connector', 'must name a registered connector');
    }
    spec.exportConfig = { ...input.exportConfig! };
  }
  // Pub/Sub offers exactly-once delivery on pull subscriptions only (StreamingPull included): push and
  // export subscriptions do not support it. An update is checked as the merged whole, so adding a push or
  // export section to an exactly-once subscription is refused as turning exactly-once on for one is.
  const wasExactlyOnceWith = (k: (typeof deliveries)[number]) =>
    kept === 'job-file' || (kept?.existing.enableExactlyOnceDelivery === true && hasConfig(kept.existing[k]));
  if (spec.enableExactlyOnceDelivery && deliveries.length && !wasExactlyOnceWith(deliveries[0]!)) {
    throw new InvalidArgumentError(
      'enableExactlyOnceDelivery',
      `exactly-once delivery is supported on pull subscriptions only, not with ${deliveries[0]}`,
      [deliveries[0]!],
    );
  }
  return spec;
}

/** Pub/Sub treats an empty pushConfig (`{}`) as "pull". */
function hasConfig(v: unknown): boolean {
  if (!v || typeof v !== 'object') return false;
  return Object.values(v).some((x) => x !== undefined && x !== null && x !== '');
}

function bool(field: string, v: unknown): boolean {
  if (v === undefined || v === null) return false;
  if (typeof v !== 'boolean') throw new InvalidArgumentError(field, `must be true or false, got ${JSON.stringify(v)}`);
  return v;
}

/** Fields Pub/Sub fixes at creation. */
export function checkImmutable(current: SubscriptionSpec, next: SubscriptionSpec): void {
  if (current.enableMessageOrdering !== next.enableMessageOrdering) {
    throw new FailedPreconditionError(
      `enableMessageOrdering cannot be changed after creation (is ${current.enableMessageOrdering}); create a new subscription instead`,
    );
  }
  if (current.filter !== next.filter) {
    throw new FailedPreconditionError(
      `filter cannot be changed after creation (is ${JSON.stringify(current.filter)}); create a new subscription instead`,
    );
  }
  if (current.topic !== next.topic) throw new FailedPreconditionError(`topic cannot be changed after creation (is ${current.topic})`);
}
