import { formatDuration, parseDuration } from '../core/duration.js';
import { InvalidArgumentError } from '../core/errors.js';
import type { IamPolicy } from '../core/iam-policies.js';
import type { ReceivedMessage } from '../core/message.js';
import type { Subscription, Topic } from '../core/pubsub-core.js';
import type { SubscriptionInput } from '../core/subscription-config.js';
import type { TopicInput } from '../core/topic-config.js';
import type { SchemaResource } from '../schema/schema-registry.js';
import type {
  ProtoCloudStorageConfig,
  ProtoDuration,
  ProtoObject,
  ProtoPolicy,
  ProtoPushConfig,
  ProtoSubscription,
  ProtoTopic,
} from './pubsub-messages.js';
import { isSet, refuseUnsupported } from './unsupported-fields.js';

/**
 * The one mapping between the core's resources and google.pubsub.v1 messages (as MESSAGE_SHAPE shapes
 * them). gRPC sends these objects as they are; REST writes them as proto3 JSON (proto-json.ts), so both
 * transports answer alike.
 */

/** google.protobuf.Duration's range: about ±10,000 years. */
const MAX_DURATION_SECONDS = 315_576_000_000;

/**
 * A Duration off the wire in seconds. One the type does not allow (nanos past a second, nanos and seconds
 * of opposite signs) is refused, naming `field`, rather than read as some other length.
 */
function seconds(d: ProtoDuration | null | undefined, field: string): number | undefined {
  if (!d) return undefined;
  const whole = Number(d.seconds ?? 0);
  const nanos = d.nanos ?? 0;
  if (!Number.isInteger(whole) || Math.abs(whole) > MAX_DURATION_SECONDS)
    throw new InvalidArgumentError(
      `${field}.seconds`,
      `must be an integer of at most ${MAX_DURATION_SECONDS} seconds, got ${String(d.seconds)}`,
    );
  if (!Number.isInteger(nanos) || Math.abs(nanos) > 999_999_999)
    throw new InvalidArgumentError(`${field}.nanos`, `must be an integer between -999999999 and 999999999, got ${nanos}`);
  if ((whole > 0 && nanos < 0) || (whole < 0 && nanos > 0))
    throw new InvalidArgumentError(`${field}.nanos`, `must have the sign of seconds (${whole}), got ${nanos}`);
  return whole + nanos / 1e9;
}
const duration = (s: number): ProtoDuration => ({ seconds: String(Math.floor(s)), nanos: Math.round((s % 1) * 1e9) });
export const timestamp = (ms: number): ProtoDuration => ({ seconds: String(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1e6 });
/** google.protobuf.Timestamp's range: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z. */
const TIMESTAMP_SECONDS = { min: -62_135_596_800, max: 253_402_300_799 };

/**
 * A Timestamp off the wire in whole ms (rounded by `round`); one outside what a Timestamp may hold is
 * refused, naming `field`.
 */
export function timestampMs(t: ProtoDuration, field: string, round: (ms: number) => number = Math.floor): number {
  const seconds = Number(t.seconds ?? 0);
  const nanos = t.nanos ?? 0;
  if (!Number.isInteger(nanos) || nanos < 0 || nanos > 999_999_999)
    throw new InvalidArgumentError(`${field}.nanos`, `must be an integer between 0 and 999999999, got ${nanos}`);
  if (!Number.isInteger(seconds) || seconds < TIMESTAMP_SECONDS.min || seconds > TIMESTAMP_SECONDS.max)
    throw new InvalidArgumentError(`${field}.seconds`, `must be a time between the years 1 and 9999, got ${String(t.seconds)}`);
  return seconds * 1000 + round(nanos / 1e6);
}

export function topicToProto(t: Topic): ProtoObject {
  return {
    name: t.name,
    labels: t.labels,
    messageRetentionDuration: t.messageRetentionDuration === undefined ? null : duration(t.messageRetentionDuration),
    schemaSettings: t.schemaSettings ?? null,
    state: t.state,
  };
}

/**
 * A proto Topic's settable fields as the core's input (unset ones as `null`). Unsupported fields it sets
 * are refused (`at` prefixes their names), unless `refuse` is false (an update looks only at its mask).
 */
export function topicFromProto(t: ProtoTopic, at = '', refuse = true): Required<TopicInput> {
  if (refuse) refuseUnsupported(t, 'topic', at);
  return {
    labels: t.labels ?? {},
    messageRetentionDuration: seconds(t.messageRetentionDuration, `${at}messageRetentionDuration`) ?? null,
    schemaSettings: t.schemaSettings ?? null,
  };
}

/**
 * A proto Subscription (defaults filled by proto-loader) to the core's input; an export section or push
 * config left at its defaults means "none". `at` prefixes field names in errors ("subscription.").
 */
export function subscriptionFromProto(p: ProtoSubscription, at = ''): SubscriptionInput {
  refuseUnsupported(p, 'subscription', at);
  refuseUnsupported(p.pushConfig, 'pushConfig', `${at}pushConfig.`);
  const input: SubscriptionInput = {
    topic: p.topic,
    enableMessageOrdering: p.enableMessageOrdering ?? false,
    retainAckedMessages: p.retainAckedMessages ?? false,
    enableExactlyOnceDelivery: p.enableExactlyOnceDelivery ?? false,
    filter: p.filter ?? '',
    labels: p.labels ?? {},
  };
  if (p.ackDeadlineSeconds) input.ackDeadlineSeconds = p.ackDeadlineSeconds;
  if (p.messageRetentionDuration) input.messageRetentionDuration = seconds(p.messageRetentionDuration, `${at}messageRetentionDuration`);
  // A policy left at its defaults is none; one that sets only maxDeliveryAttempts is refused for its missing topic.
  if (p.deadLetterPolicy?.deadLetterTopic || p.deadLetterPolicy?.maxDeliveryAttempts) {
    input.deadLetterPolicy = {
      deadLetterTopic: p.deadLetterPolicy.deadLetterTopic,
      maxDeliveryAttempts: p.deadLetterPolicy.maxDeliveryAttempts || undefined,
    };
  }
  if (p.retryPolicy)
    input.retryPolicy = {
      minimumBackoff: seconds(p.retryPolicy.minimumBackoff, `${at}retryPolicy.minimumBackoff`),
      maximumBackoff: seconds(p.retryPolicy.maximumBackoff, `${at}retryPolicy.maximumBackoff`),
    };
  if (p.expirationPolicy) input.expirationPolicy = { ttl: seconds(p.expirationPolicy.ttl, `${at}expirationPolicy.ttl`) ?? null };
  if (p.pushConfig && isSet(p.pushConfig)) input.pushConfig = pushConfigFromProto(p.pushConfig);
  if (p.bigqueryConfig && isSet(p.bigqueryConfig)) {
    const b = p.bigqueryConfig;
    input.bigqueryConfig = setFields({
      table: typeof b.table === 'string' ? b.table.replace(':', '.') : b.table,
      useTopicSchema: b.useTopicSchema,
      useTableSchema: b.useTableSchema,
      writeMetadata: b.writeMetadata,
      dropUnknownFields: b.dropUnknownFields,
      serviceAccountEmail: b.serviceAccountEmail,
    });
  }
  if (p.cloudStorageConfig && isSet(p.cloudStorageConfig)) input.cloudStorageConfig = cloudStorageFromProto(p.cloudStorageConfig);
  // Orderly's own (REST and job files): a third-party export connector, checked by normalizeSubscription.
  if (p.exportConfig !== undefined) input.exportConfig = p.exportConfig as SubscriptionInput['exportConfig'];
  return input;
}

export function pushConfigFromProto(c: ProtoPushConfig): NonNullable<SubscriptionInput['pushConfig']> {
  const config: NonNullable<SubscriptionInput['pushConfig']> = { pushEndpoint: c.pushEndpoint, attributes: c.attributes ?? {} };
  if (c.oidcToken) config.oidcToken = { serviceAccountEmail: c.oidcToken.serviceAccountEmail, audience: c.oidcToken.audience };
  if (c.noWrapper) config.noWrapper = { writeMetadata: c.noWrapper.writeMetadata };
  return config;
}

function cloudStorageFromProto(c: ProtoCloudStorageConfig): Record<string, unknown> {
  const config: Record<string, unknown> = setFields({
    bucket: c.bucket,
    filenamePrefix: c.filenamePrefix,
    filenameSuffix: c.filenameSuffix,
    filenameDatetimeFormat: c.filenameDatetimeFormat,
    serviceAccountEmail: c.serviceAccountEmail,
    // Orderly's own (REST and job files): Parquet files and parallel files.
    parquetConfig: c.parquetConfig,
    shards: c.shards,
  });
  if (c.avroConfig)
    config.avroConfig = setFields({ writeMetadata: c.avroConfig.writeMetadata, useTopicSchema: c.avroConfig.useTopicSchema });
  else if (c.textConfig || config.parquetConfig === undefined) config.textConfig = {};
  if (c.maxDuration) config.maxDuration = formatDuration(seconds(c.maxDuration, 'cloudStorageConfig.maxDuration')!);
  if (Number(c.maxBytes)) config.maxBytes = int64(c.maxBytes);
  if (Number(c.maxMessages)) config.maxMessages = int64(c.maxMessages);
  return config;
}

/**
 * An int64 field as the stored config keeps it: a number, or past 2^53 its decimal digits, which a Number
 * would change (maxMessages 2^63-1 read back as -9223372036854775616). The connector reads either.
 */
function int64(value: string): number | string {
  const n = Number(value);
  return Number.isSafeInteger(n) ? n : value;
}

/** The fields that are set (not undefined, null, false, 0 or ""), so a stored section holds what was given. */
function setFields(fields: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(fields).filter(([, v]) => isSet(v) || (typeof v === 'object' && v !== null)));
}

export function subscriptionToProto(s: Subscription): ProtoObject {
  const state = s.state === 'ACTIVE' ? 'ACTIVE' : 'RESOURCE_ERROR';
  return {
    name: s.name,
    topic: s.topic,
    ackDeadlineSeconds: s.ackDeadlineSeconds,
    messageRetentionDuration: duration(s.messageRetentionDuration),
    retainAckedMessages: s.retainAckedMessages,
    enableMessageOrdering: s.enableMessageOrdering,
    filter: s.filter,
    enableExactlyOnceDelivery: s.enableExactlyOnceDelivery,
    labels: s.labels,
    deadLetterPolicy: s.deadLetterPolicy ?? null,
    retryPolicy: s.retryPolicy
      ? { minimumBackoff: duration(s.retryPolicy.minimumBackoff), maximumBackoff: duration(s.retryPolicy.maximumBackoff) }
      : null,
    expirationPolicy: s.expirationPolicy ? { ttl: s.expirationPolicy.ttl === null ? null : duration(s.expirationPolicy.ttl) } : null,
    pushConfig: s.pushConfig ? pushConfigToProto(s.pushConfig) : {},
    bigqueryConfig: s.bigqueryConfig ? { ...s.bigqueryConfig, state: s.state } : null,
    cloudStorageConfig: s.cloudStorageConfig ? cloudStorageToProto(s.cloudStorageConfig, s.state) : null,
    topicMessageRetentionDuration: s.topicMessageRetentionDuration === undefined ? null : duration(s.topicMessageRetentionDuration),
    state,
    detached: s.detached,
    ...(s.exportConfig ? { exportConfig: s.exportConfig } : {}),
  };
}

function pushConfigToProto(c: NonNullable<Subscription['pushConfig']>): ProtoObject {
  return {
    pushEndpoint: c.pushEndpoint,
    attributes: c.attributes,
    ...(c.oidcToken ? { oidcToken: c.oidcToken } : {}),
    ...(c.noWrapper ? { noWrapper: c.noWrapper } : {}),
  };
}

/** A cloudStorageConfig as the core keeps it: what cloudStorageFromProto (or a job file) gave, checked by its connector. */
interface StoredCloudStorageConfig {
  bucket?: string;
  filenamePrefix?: string;
  filenameSuffix?: string;
  filenameDatetimeFormat?: string;
  avroConfig?: { writeMetadata?: boolean; useTopicSchema?: boolean };
  parquetConfig?: unknown;
  /** Seconds, or a duration string ("600s"). */
  maxDuration?: number | string;
  /** A number, or a decimal string past 2^53 (int64). */
  maxBytes?: number | string;
  maxMessages?: number | string;
  serviceAccountEmail?: string;
  shards?: unknown;
}

function cloudStorageToProto(stored: Record<string, unknown>, state: string): ProtoObject {
  const c = stored as StoredCloudStorageConfig;
  // A job file may say "5m": parsed as the export parses it (parseFloat read it as 5 seconds).
  const maxDuration = c.maxDuration === undefined ? undefined : parseDuration('cloudStorageConfig.maxDuration', c.maxDuration);
  const format = c.avroConfig
    ? { avroConfig: { writeMetadata: !!c.avroConfig.writeMetadata, useTopicSchema: !!c.avroConfig.useTopicSchema } }
    : c.parquetConfig
      ? {}
      : { textConfig: {} };
  return {
    bucket: c.bucket,
    filenamePrefix: c.filenamePrefix ?? '',
    filenameSuffix: c.filenameSuffix ?? '',
    filenameDatetimeFormat: c.filenameDatetimeFormat ?? '',
    ...format,
    ...(maxDuration !== undefined ? { maxDuration: duration(maxDuration) } : {}),
    maxBytes: String(c.maxBytes ?? 0),
    maxMessages: String(c.maxMessages ?? 0),
    serviceAccountEmail: c.serviceAccountEmail ?? '',
    state,
    ...(c.parquetConfig !== undefined ? { parquetConfig: c.parquetConfig } : {}),
    ...(c.shards !== undefined ? { shards: c.shards } : {}),
  };
}

export function receivedToProto(m: ReceivedMessage): ProtoObject {
  return {
    ackId: m.ackId,
    deliveryAttempt: m.deliveryAttempt,
    message: {
      data: m.message.data,
      attributes: m.message.attributes,
      messageId: m.message.messageId,
      publishTime: timestamp(m.message.publishTime.getTime()),
      orderingKey: m.message.orderingKey,
    },
  };
}

export function schemaToProto(s: SchemaResource): ProtoObject {
  return {
    name: s.name,
    type: s.type,
    definition: s.definition ?? '',
    revisionId: s.revisionId,
    revisionCreateTime: timestamp(Date.parse(s.revisionCreateTime)),
  };
}

export function policyToProto(p: IamPolicy): ProtoObject {
  return { version: p.version, bindings: p.bindings, auditConfigs: p.auditConfigs, etag: Buffer.from(p.etag, 'base64') };
}

export function policyFromProto(p: ProtoPolicy): IamPolicy {
  return {
    version: p.version ?? 0,
    bindings: (p.bindings ?? []).map((b) => ({
      role: b.role,
      members: b.members ?? [],
      ...(b.condition ? { condition: b.condition } : {}),
    })),
    auditConfigs: p.auditConfigs ?? [],
    etag: p.etag?.length ? Buffer.from(p.etag).toString('base64') : '',
  };
}
