import { InvalidArgumentError } from '../core/errors.js';
import type { SubscriptionInput } from '../core/subscription-config.js';
import type { TopicInput } from '../core/topic-config.js';
import { UNSUPPORTED_FIELDS } from './unsupported-fields.js';

/** Subscription fields an update mask may name. */
const UPDATABLE = new Set([
  'ackDeadlineSeconds',
  'messageRetentionDuration',
  'retainAckedMessages',
  'deadLetterPolicy',
  'retryPolicy',
  'enableExactlyOnceDelivery',
  'expirationPolicy',
  'pushConfig',
  'bigqueryConfig',
  'cloudStorageConfig',
  'exportConfig',
  'labels',
]);

/** Subscription fields fixed at creation: a mask naming one is INVALID_ARGUMENT, whatever value it gives. */
const IMMUTABLE = new Set(['topic', 'enableMessageOrdering', 'filter']);

const snakeCase = (field: string) => field.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/**
 * The patch an update mask selects from `subscription` (camelCase or snake_case paths); a masked field
 * the subscription leaves out is cleared, as Pub/Sub does.
 */
export function subscriptionPatch(paths: string[], subscription: Record<string, unknown>): Partial<SubscriptionInput> {
  const patch: Record<string, unknown> = {};
  for (const [path, field] of maskFields(paths)) {
    if ((UNSUPPORTED_FIELDS.subscription as readonly string[]).includes(field))
      throw new InvalidArgumentError(`updateMask: ${path}`, 'is not supported by Orderly');
    // Pub/Sub refuses the path itself ("Invalid update_mask provided ...: the 'topic' field in the Subscription is not mutable").
    if (IMMUTABLE.has(field))
      throw new InvalidArgumentError(
        'updateMask',
        `the '${snakeCase(field)}' field of a subscription is not mutable (fixed at creation); create a new subscription instead`,
      );
    if (!UPDATABLE.has(field)) throw new InvalidArgumentError('updateMask', `unknown or read-only field path ${JSON.stringify(path)}`);
    patch[field] = subscription[field] ?? null;
  }
  return patch;
}

/** Topic fields an update mask may name. */
const TOPIC_UPDATABLE = new Set(['labels', 'messageRetentionDuration', 'schemaSettings']);

/**
 * The patch an update mask selects from `topic` (its settable fields, unset ones as null): exactly the
 * masked fields change, a masked field the topic leaves out is cleared, the others stay.
 */
export function topicPatch(paths: string[], topic: Required<TopicInput>): TopicInput {
  const patch: Record<string, unknown> = {};
  for (const [path, field] of maskFields(paths)) {
    if ((UNSUPPORTED_FIELDS.topic as readonly string[]).includes(field))
      throw new InvalidArgumentError(`updateMask: ${path}`, 'is not supported by Orderly');
    if (!TOPIC_UPDATABLE.has(field))
      throw new InvalidArgumentError('updateMask', `unknown or read-only field path ${JSON.stringify(path)}`);
    patch[field] = topic[field as keyof TopicInput];
  }
  return patch;
}

/**
 * [path as given, camelCase field] for each path of an update mask, which must name at least one. Paths
 * are snake_case, as FieldMask defines them and Pub/Sub requires (`push_config`, not `pushConfig`, which
 * it refuses); REST's JSON masks are camelCase and reach here converted (proto-json.ts).
 */
export function maskFields(paths: string[]): [string, string][] {
  if (!paths.length) throw new InvalidArgumentError('updateMask', 'must name at least one field to update');
  return paths.map((p) => {
    if (/[A-Z]/.test(p))
      throw new InvalidArgumentError(
        'updateMask',
        `unknown field path ${JSON.stringify(p)}: paths are snake_case field names (push_config, not pushConfig)`,
      );
    return [p, p.trim().replace(/_([a-z])/g, (_, c: string) => c.toUpperCase())];
  });
}
