import { z } from 'zod';
import { InvalidArgumentError } from '../core/errors.js';
import { isSet, UNSUPPORTED_FIELDS } from './unsupported-fields.js';

/**
 * The request bodies of Pub/Sub's REST v1 API in proto3 JSON, one schema per route, checked before a
 * request reaches the core: the google.pubsub.v1 field types (integers as a number or a decimal
 * string, durations as "600s", timestamps in RFC 3339, bytes in base64), unknown fields refused, and
 * `null` taken as "not set" as proto3 JSON does. Ranges and cross-field rules stay with the core and
 * the export connectors, which name the field too.
 */

const string = z.string({ error: 'must be a string' });
const bool = z.boolean({ error: 'must be true or false' });
const strings = z.array(string, { error: 'must be a list of strings' });
const stringMap = z.record(z.string(), z.string({ error: 'must be a string' }), { error: 'must be an object of string values' });

/** int32 in proto3 JSON: a number or a decimal string. */
const int32 = z
  .custom<number | string>((v) => (typeof v === 'number' && Number.isInteger(v)) || (typeof v === 'string' && /^-?\d{1,10}$/.test(v)), {
    error: 'must be an integer (a number or a decimal string)',
  })
  .transform(Number)
  .refine((n) => n >= -(2 ** 31) && n <= 2 ** 31 - 1, { error: 'is out of the int32 range' });

const duration = z.string({ error: 'must be a duration string like "600s"' }).regex(/^-?\d+(\.\d{1,9})?s$/, { error: 'must be a duration string like "600s"' });

const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/;
const timestamp = z
  .string({ error: 'must be an RFC 3339 timestamp string' })
  .refine((s) => RFC3339.test(s) && Number.isFinite(Date.parse(s)), { error: 'must be an RFC 3339 timestamp like "2024-05-01T12:00:00Z"' })
  .transform((s) => Date.parse(s));

/** Standard or URL-safe base64, padded or not, as proto3 JSON reads `bytes`. */
const bytes = z
  .string({ error: 'must be a base64 string' })
  .refine((s) => /^[A-Za-z0-9+/_-]*={0,2}$/.test(s) && s.replace(/=+$/, '').length % 4 !== 1 && (!s.endsWith('=') || s.length % 4 === 0), {
    error: 'must be a base64 string',
  })
  .transform((s) => Buffer.from(s, 'base64'));

/** Output-only fields: a client may send back what it read; Pub/Sub ignores them on input. */
const outputOnly = z.unknown();
const unsupported = z.unknown().refine((v) => !isSet(v), { error: 'is not supported by Orderly' });
/** A oneof member whose mere presence selects a behaviour Orderly does not have. */
const unsupportedChoice = z.unknown().refine((v) => v === undefined || v === null, { error: 'is not supported by Orderly' });
const unsupportedFields = (names: readonly string[], schema: z.ZodType) => Object.fromEntries(names.map((n) => [n, schema]));

const object = <T extends z.ZodRawShape>(shape: T) => z.strictObject(shape, { error: 'must be a JSON object' });
/** Every field of `shape` may be left out or `null` (proto3 JSON's "not set"); both come out undefined. */
const optional = <T extends z.ZodRawShape>(shape: T) =>
  Object.fromEntries(Object.entries(shape).map(([k, s]) => [k, (s as z.ZodType).nullish().transform((v) => v ?? undefined)])) as unknown as {
    [K in keyof T]: z.ZodType<z.output<T[K]> | undefined, z.input<T[K]> | null | undefined>;
  };

const topic = object(
  optional({
    name: string,
    labels: stringMap,
    state: outputOnly,
    ...unsupportedFields(UNSUPPORTED_FIELDS.topic, unsupported),
  }),
);

const pushConfig = object(
  optional({
    pushEndpoint: string,
    attributes: stringMap,
    pubsubWrapper: object({}),
    ...unsupportedFields(UNSUPPORTED_FIELDS.pushConfig, unsupportedChoice),
  }),
);

/** The export sections are checked field by field by their connectors (which know every field and range). */
const exportSection = z.record(z.string(), z.unknown(), { error: 'must be a JSON object' });

const subscription = object(
  optional({
    name: string,
    topic: string,
    pushConfig,
    bigqueryConfig: exportSection,
    cloudStorageConfig: exportSection,
    /** Orderly's own: a registered third-party export connector and its settings. */
    exportConfig: z.looseObject({ connector: string }, { error: 'must be a JSON object' }),
    ackDeadlineSeconds: int32,
    retainAckedMessages: bool,
    messageRetentionDuration: duration,
    labels: stringMap,
    enableMessageOrdering: bool,
    expirationPolicy: object(optional({ ttl: duration })),
    filter: string,
    deadLetterPolicy: object(optional({ deadLetterTopic: string, maxDeliveryAttempts: int32 })),
    retryPolicy: object(optional({ minimumBackoff: duration, maximumBackoff: duration })),
    enableExactlyOnceDelivery: bool,
    /** Set by DetachSubscription; a create that sets it is refused, an update ignores it unless masked (then refused). */
    detached: bool,
    topicMessageRetentionDuration: outputOnly,
    state: outputOnly,
    analyticsHubSubscriptionInfo: outputOnly,
    ...unsupportedFields(UNSUPPORTED_FIELDS.subscription, unsupported),
  }),
);

const message = object(
  optional({
    data: bytes,
    attributes: stringMap,
    orderingKey: string,
    messageId: outputOnly,
    publishTime: outputOnly,
  }),
);

/** A FieldMask in proto3 JSON: one string of comma-separated paths. */
const fieldMask = string.transform((s) => s.split(',').filter(Boolean));

const empty = object({}).nullish();

const snapshot = object(
  optional({
    name: string,
    /** Fixed at creation (the subscription's topic): ignored unless an update mask names it, then refused. */
    topic: string,
    expireTime: timestamp,
    labels: stringMap,
  }),
);

export const restBodies = {
  empty,
  topic,
  updateTopic: object(optional({ topic, updateMask: fieldMask })),
  publish: object({ messages: z.array(message, { error: 'must be a list of messages' }) }),
  subscription,
  updateSubscription: object(optional({ subscription, updateMask: fieldMask })),
  pull: object(optional({ returnImmediately: bool, maxMessages: int32 })),
  acknowledge: object(optional({ ackIds: strings })),
  modifyAckDeadline: object(optional({ ackIds: strings, ackDeadlineSeconds: int32 })),
  modifyPushConfig: object(optional({ pushConfig })),
  seek: object(optional({ time: timestamp, snapshot: string })),
  createSnapshot: object(optional({ subscription: string, labels: stringMap, tags: unsupported })),
  updateSnapshot: object(optional({ snapshot, updateMask: fieldMask })),
} as const;

/** Validates `body` (undefined: no body); the first problems, each with its field path, become one INVALID_ARGUMENT. */
export function parseBody<S extends z.ZodType>(schema: S, body: unknown): z.output<S> {
  const parsed = schema.safeParse(body === undefined ? {} : body);
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.slice(0, 5).flatMap((issue) => {
    if (issue.code === 'unrecognized_keys') return issue.keys.map((k) => `${fieldPath([...issue.path, k])}: unknown field`);
    return [`${fieldPath(issue.path)}: ${issue.message}`];
  });
  const [first, ...rest] = problems;
  const separator = first!.indexOf(': ');
  throw new InvalidArgumentError(first!.slice(0, separator), [first!.slice(separator + 2), ...rest].join('; '));
}

function fieldPath(path: PropertyKey[]): string {
  return path.reduce<string>((acc, p) => (typeof p === 'number' ? `${acc}[${p}]` : acc ? `${acc}.${String(p)}` : String(p)), '') || 'request body';
}
