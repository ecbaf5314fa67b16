import { InvalidArgumentError } from '../core/errors.js';

/**
 * google.pubsub.v1 fields Orderly does not implement. A request that sets one is refused naming the
 * field, rather than accepted with the field silently dropped. Output-only fields (state,
 * topicMessageRetentionDuration, ...) and `satisfiesPzs` (which Pub/Sub ignores in requests) are ignored
 * on input, as Pub/Sub ignores them; `detached` is set by DetachSubscription only (a create that sets it
 * is refused). docs/api-coverage.md lists every field and what Orderly does with it.
 */
export const UNSUPPORTED_FIELDS = {
  topic: ['messageStoragePolicy', 'kmsKeyName', 'ingestionDataSourceSettings', 'messageTransforms', 'tags'],
  subscription: ['bigtableConfig', 'messageTransforms', 'tags'],
  pushConfig: [],
} as const satisfies Record<string, readonly string[]>;

/**
 * Set = holds something other than proto3 defaults: not absent, null, false, 0, "", an enum at its zero
 * value (Pub/Sub's are all named `..._UNSPECIFIED`), empty bytes, an empty list or map, or a message whose
 * fields are all unset (proto-loader fills every field of a message a client sent, so `{}` arrives with
 * defaults in it).
 */
export function isSet(v: unknown): boolean {
  if (v === undefined || v === null || v === false || v === 0 || v === '' || v === '0') return false;
  if (typeof v === 'string') return !v.endsWith('_UNSPECIFIED');
  if (v instanceof Uint8Array || Array.isArray(v)) return v.length > 0;
  if (typeof v === 'object') return Object.values(v).some(isSet);
  return true;
}

/** Throws for the first unsupported field that `message` sets; `at` is its path ("" or "subscription."). */
export function refuseUnsupported(
  message: Record<string, unknown> | null | undefined,
  kind: keyof typeof UNSUPPORTED_FIELDS,
  at: string,
): void {
  for (const field of UNSUPPORTED_FIELDS[kind] as readonly string[]) {
    if (message && isSet(message[field])) throw new InvalidArgumentError(`${at}${field}`, 'is not supported by Orderly');
  }
}
