import { formatDuration } from '../core/duration.js';
import type { ReceivedMessage } from '../core/message.js';
import type { Subscription, Topic } from '../core/pubsub-core.js';
import type { SubscriptionInput } from '../core/subscription-config.js';
import { refuseUnsupported } from './unsupported-fields.js';

/** google.protobuf.Duration / Timestamp as proto-loader hands them over (int64 as string). */
export interface ProtoDuration {
  seconds?: string | number;
  nanos?: number;
}

const seconds = (d: ProtoDuration | null | undefined): number | undefined =>
  d ? Number(d.seconds ?? 0) + (d.nanos ?? 0) / 1e9 : undefined;
const duration = (s: number): ProtoDuration => ({ seconds: String(Math.floor(s)), nanos: Math.round((s % 1) * 1e9) });
export const timestamp = (ms: number): ProtoDuration => ({ seconds: String(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1e6 });
export const timestampMs = (t: ProtoDuration): number => Number(t.seconds ?? 0) * 1000 + Math.floor((t.nanos ?? 0) / 1e6);

export function topicToProto(t: Topic): Record<string, unknown> {
  return { name: t.name, labels: t.labels };
}

/**
 * A proto Subscription (defaults filled by proto-loader) to the core's input; empty configs mean "none".
 * `at` prefixes field names in errors ("subscription." inside an UpdateSubscriptionRequest).
 */
export function subscriptionFromProto(p: Record<string, any>, at = ''): SubscriptionInput {
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
  if (p.messageRetentionDuration) input.messageRetentionDuration = seconds(p.messageRetentionDuration);
  if (p.deadLetterPolicy?.deadLetterTopic) {
    input.deadLetterPolicy = { deadLetterTopic: p.deadLetterPolicy.deadLetterTopic, maxDeliveryAttempts: p.deadLetterPolicy.maxDeliveryAttempts || undefined };
  }
  if (p.retryPolicy) input.retryPolicy = { minimumBackoff: seconds(p.retryPolicy.minimumBackoff), maximumBackoff: seconds(p.retryPolicy.maximumBackoff) };
  if (p.expirationPolicy) input.expirationPolicy = { ttl: seconds(p.expirationPolicy.ttl) ?? null };
  if (p.pushConfig?.pushEndpoint) input.pushConfig = { pushEndpoint: p.pushConfig.pushEndpoint, attributes: p.pushConfig.attributes };
  if (p.bigqueryConfig?.table) {
    const b = p.bigqueryConfig;
    input.bigqueryConfig = { table: b.table.replace(':', '.'), useTopicSchema: b.useTopicSchema, useTableSchema: b.useTableSchema, writeMetadata: b.writeMetadata, dropUnknownFields: b.dropUnknownFields };
  }
  if (p.cloudStorageConfig?.bucket) {
    const c = p.cloudStorageConfig;
    const config: Record<string, unknown> = { bucket: c.bucket };
    if (c.filenamePrefix) config.filenamePrefix = c.filenamePrefix;
    if (c.filenameSuffix) config.filenameSuffix = c.filenameSuffix;
    if (c.filenameDatetimeFormat) config.filenameDatetimeFormat = c.filenameDatetimeFormat;
    if (c.avroConfig) config.avroConfig = { writeMetadata: c.avroConfig.writeMetadata, useTopicSchema: c.avroConfig.useTopicSchema || undefined };
    else config.textConfig = {};
    if (c.maxDuration) config.maxDuration = formatDuration(seconds(c.maxDuration)!);
    if (Number(c.maxBytes)) config.maxBytes = Number(c.maxBytes);
    if (Number(c.maxMessages)) config.maxMessages = Number(c.maxMessages);
    input.cloudStorageConfig = config;
  }
  return input;
}

export function subscriptionToProto(s: Subscription): Record<string, unknown> {
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
    retryPolicy: s.retryPolicy ? { minimumBackoff: duration(s.retryPolicy.minimumBackoff), maximumBackoff: duration(s.retryPolicy.maximumBackoff) } : null,
    expirationPolicy: s.expirationPolicy ? { ttl: s.expirationPolicy.ttl === null ? null : duration(s.expirationPolicy.ttl) } : null,
    pushConfig: s.pushConfig ?? {},
    bigqueryConfig: s.bigqueryConfig ? { ...s.bigqueryConfig, state: s.state } : null,
    cloudStorageConfig: s.cloudStorageConfig ? cloudStorageToProto(s.cloudStorageConfig, s.state) : null,
    state,
    detached: s.detached,
  };
}

export function receivedToProto(m: ReceivedMessage): Record<string, unknown> {
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

function cloudStorageToProto(c: Record<string, any>, state: string): Record<string, unknown> {
  const maxDuration = c.maxDuration === undefined ? undefined : typeof c.maxDuration === 'number' ? c.maxDuration : Number.parseFloat(c.maxDuration);
  return {
    bucket: c.bucket,
    filenamePrefix: c.filenamePrefix ?? '',
    filenameSuffix: c.filenameSuffix ?? '',
    filenameDatetimeFormat: c.filenameDatetimeFormat ?? '',
    ...(c.avroConfig ? { avroConfig: { writeMetadata: !!c.avroConfig.writeMetadata } } : { textConfig: {} }),
    ...(maxDuration !== undefined ? { maxDuration: duration(maxDuration) } : {}),
    maxBytes: String(c.maxBytes ?? 0),
    maxMessages: String(c.maxMessages ?? 0),
    state,
  };
}
