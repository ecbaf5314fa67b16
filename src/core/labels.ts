import { InvalidArgumentError } from './errors.js';

/** Google Cloud's label rules, which Pub/Sub applies to topics, subscriptions and snapshots. */
const MAX_LABELS = 64;
/** 1-63 characters: lowercase letters (any script's), digits, `_` and `-`, starting with a letter. */
const KEY = /^[\p{Ll}\p{Lo}][\p{Ll}\p{Lo}\p{N}_-]{0,62}$/u;
/** As a key, but may be empty and may start with any of those characters. */
const VALUE = /^[\p{Ll}\p{Lo}\p{N}_-]{0,63}$/u;

/** A copy of `labels` if every label is one Pub/Sub takes; otherwise INVALID_ARGUMENT naming the label. */
export function checkLabels(labels: unknown, field = 'labels'): Record<string, string> {
  if (!labels || typeof labels !== 'object' || Array.isArray(labels))
    throw new InvalidArgumentError(field, 'must be an object of string values');
  const entries = Object.entries(labels);
  if (entries.length > MAX_LABELS) throw new InvalidArgumentError(field, `at most ${MAX_LABELS} labels, got ${entries.length}`);
  for (const [key, value] of entries) {
    if (typeof value !== 'string') throw new InvalidArgumentError(`${field}.${key}`, 'must be a string');
    if (!KEY.test(key))
      throw new InvalidArgumentError(
        field,
        `label key ${JSON.stringify(key)} must be 1-63 lowercase letters, digits, "_" or "-", starting with a lowercase letter`,
      );
    if (!VALUE.test(value))
      throw new InvalidArgumentError(
        `${field}.${key}`,
        `must be at most 63 lowercase letters, digits, "_" or "-", got ${JSON.stringify(value)}`,
      );
  }
  // Object.fromEntries defines each key as an own property, `__proto__` included.
  return Object.fromEntries(entries);
}
