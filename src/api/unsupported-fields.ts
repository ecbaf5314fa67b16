import { InvalidArgumentError } from '../core/errors.js';

/**
 * google.pubsub.v1 fields Orderly does not implement. A request that sets one is refused naming the
 * field, rather than accepted with the field silently dropped. Output-only fields (state,
 * topicMessageRetentionDuration, ...) are ignored on input, as Pub/Sub ignores them; `detached` is set by
 * DetachSubscription only (a create that sets it is refused).
 */
export const UNSUPPORTED_FIELDS = {
  topic: ['messageStoragePolicy', 'kmsKeyName', 'schemaSettings', 'satisfiesPzs', 'messageRetentionDuration', 'ingestionDataSourceSettings', 'messageTransforms', 'tags'],
  subscription: ['bigtableConfig', 'messageTransforms', 'tags'],
  pushConfig: ['oidcToken', 'noWrapper'],
} as const;

/** Set = not the proto3 default (absent, null, false, 0, "", an empty list or map). */
export function isSet(v: unknown): boolean {
  if (v === undefined || v === null || v === false || v === 0 || v === '' || v === '0') return false;
  if (Array.isArray(v)) return v.length > 0;
  if (typeof v === 'object') return Object.keys(v).length > 0;
  return true;
}

/** Throws for the first unsupported field that `message` sets; `at` is its path ("" or "subscription."). */
export function refuseUnsupported(message: Record<string, unknown> | null | undefined, kind: keyof typeof UNSUPPORTED_FIELDS, at: string): void {
  for (const field of UNSUPPORTED_FIELDS[kind]) {
    if (message && isSet(message[field])) throw new InvalidArgumentError(`${at}${field}`, 'is not supported by Orderly');
  }
}
