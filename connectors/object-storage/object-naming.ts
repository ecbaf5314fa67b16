import { UTCDate } from '@date-fns/utc';
// The one function, not the whole library: importing 'date-fns' loads every module of it (a quarter second).
import { format } from 'date-fns/format';
import { randomBytes } from 'node:crypto';
import { InvalidArgumentError } from '../../src/core/errors.js';

/** Pub/Sub's default: `2023-09-25T04:10:00+00:00`. */
export const DEFAULT_DATETIME_FORMAT = 'YYYY-MM-DDThh:mm:ss+00:00';

const TOKENS: [token: string, dateFns: string][] = [
  ['YYYY', 'yyyy'],
  ['+00:00', 'xxx'],
  ['YY', 'yy'],
  ['MM', 'MM'],
  ['DD', 'dd'],
  ['hh', 'HH'],
  ['mm', 'mm'],
  ['ss', 'ss'],
  ['T', "'T'"],
  ['Z', "'Z'"],
];
const SEPARATORS = ['-', '_', ':', '/'];
const REQUIRED = [['YYYY', 'YY'], ['MM'], ['DD'], ['hh'], ['mm'], ['ss']];

export interface ObjectNamer {
  /** `<prefix><UTC datetime>_<unique id><suffix>`; a format ending in a separator replaces the `_`. */
  name(at: Date, uniqueId: string): string;
}

/** Digits of the file counter: a fixed width, so that names of one datetime sort by it. */
const COUNTER_DIGITS = 16;

/**
 * The unique part of an object name: the subscription's file counter, zero-padded (files opened in the
 * same second sort in the order they opened, which per key is sequence order), then the writer's tag
 * (random per writer, so two processes writing under one prefix never make the same name).
 */
export function uniqueId(counter: number, writerTag: string): string {
  return `${String(counter).padStart(COUNTER_DIGITS, '0')}-${writerTag}`;
}

/** 12 hex digits, new for every writer. */
export function newWriterTag(): string {
  return randomBytes(6).toString('hex');
}

/**
 * Validates Pub/Sub's `filenameDatetimeFormat` (tokens YYYY|YY, MM, DD, hh, mm, ss — each once —
 * optional T and Z or +00:00, separators - _ : /) and translates it to a date-fns pattern.
 */
export function parseDatetimeFormat(field: string, spec: string): { pattern: string; trailingSeparator?: string } {
  const parts: string[] = [];
  const seen = new Map<string, number>();
  let rest = spec;
  while (rest.length) {
    const token = TOKENS.find(([t]) => rest.startsWith(t));
    if (token) {
      parts.push(token[1]);
      seen.set(token[0], (seen.get(token[0]) ?? 0) + 1);
      rest = rest.slice(token[0].length);
    } else if (SEPARATORS.includes(rest[0]!)) {
      parts.push(rest[0]!);
      rest = rest.slice(1);
    } else {
      throw new InvalidArgumentError(
        field,
        `unexpected "${rest[0]}" at position ${spec.length - rest.length} in ${JSON.stringify(spec)}; allowed: YYYY or YY, MM, DD, hh, mm, ss, T, Z or +00:00, and the separators - _ : /`,
      );
    }
  }
  for (const group of REQUIRED) {
    const count = group.reduce((n, t) => n + (seen.get(t) ?? 0), 0);
    if (count !== 1)
      throw new InvalidArgumentError(field, `${group.join(' or ')} must appear exactly once in ${JSON.stringify(spec)}, found ${count}`);
  }
  for (const t of ['T', 'Z', '+00:00']) {
    if ((seen.get(t) ?? 0) > 1) throw new InvalidArgumentError(field, `${t} may appear at most once in ${JSON.stringify(spec)}`);
  }
  if ((seen.get('Z') ?? 0) + (seen.get('+00:00') ?? 0) > 1)
    throw new InvalidArgumentError(field, `use Z or +00:00, not both, in ${JSON.stringify(spec)}`);
  const last = spec[spec.length - 1]!;
  return SEPARATORS.includes(last) ? { pattern: parts.slice(0, -1).join(''), trailingSeparator: last } : { pattern: parts.join('') };
}

export function objectNamer(prefix: string, suffix: string, datetimeFormat: string): ObjectNamer {
  const { pattern, trailingSeparator } = parseDatetimeFormat('cloudStorageConfig.filenameDatetimeFormat', datetimeFormat);
  return {
    name: (at, unique) => `${prefix}${format(new UTCDate(at), pattern)}${trailingSeparator ?? '_'}${unique}${suffix}`,
  };
}

/** Where fleets keep their manifests in a bucket (see bucket-manifest.ts); no data object's name starts with it. */
export const RESERVED_PREFIX = '_orderly/';

/**
 * Object key prefixes must stay inside the bucket layout: no `..` segment, no empty one (`//`: MinIO and the
 * embedded S3 server refuse such names, so every upload would fail), no leading `/`, not Orderly's own folder.
 */
export function checkPrefix(field: string, prefix: string): string {
  if (prefix.startsWith('/')) throw new InvalidArgumentError(field, `must not start with "/", got ${JSON.stringify(prefix)}`);
  if (prefix.startsWith(RESERVED_PREFIX))
    throw new InvalidArgumentError(
      field,
      `must not start with "${RESERVED_PREFIX}" (Orderly keeps fleet manifests there), got ${JSON.stringify(prefix)}`,
    );
  if (prefix.split('/').some((segment) => segment === '..' || segment === '.')) {
    throw new InvalidArgumentError(field, `must not contain "." or ".." path segments, got ${JSON.stringify(prefix)}`);
  }
  if (prefix.includes('//'))
    throw new InvalidArgumentError(field, `must not contain "//" (an empty path segment), got ${JSON.stringify(prefix)}`);
  // eslint-disable-next-line no-control-regex -- control characters are what this refuses
  if (/[\u0000-\u001f\\]/.test(prefix))
    throw new InvalidArgumentError(field, `must not contain control characters or "\\", got ${JSON.stringify(prefix)}`);
  return prefix;
}
