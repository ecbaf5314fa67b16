import { checkRange, parseDuration } from '../../src/core/duration.js';
import { InvalidArgumentError, UnknownFieldError } from '../../src/core/errors.js';
import { checkServiceAccountEmail } from '../../src/core/service-account.js';
import {
  checkPrefix,
  DEFAULT_DATETIME_FORMAT,
  newWriterTag,
  objectNamer,
  parseDatetimeFormat,
  RESERVED_PREFIX,
  uniqueId,
} from './object-naming.js';

export type OutputFormat =
  | { kind: 'text' }
  /** `useTopicSchema`: records laid out by the topic's schema (docs/schemas.md), not Pub/Sub's `data` record. */
  | { kind: 'avro'; writeMetadata: boolean; useTopicSchema?: boolean }
  | { kind: 'parquet'; writeMetadata: boolean; compression: 'UNCOMPRESSED' | 'GZIP' | 'SNAPPY' };

/** Pub/Sub's `cloudStorageConfig` (plus Orderly's `parquetConfig` and `shards`). */
export interface ObjectStorageConfig {
  bucket: string;
  filenamePrefix: string;
  filenameSuffix: string;
  filenameDatetimeFormat: string;
  format: OutputFormat;
  maxDurationSeconds: number;
  maxBytes: number;
  maxMessages: number;
  /** Files open at once; keys are spread over them by a stable hash. */
  shards: number;
}

const F = 'cloudStorageConfig';
const KNOWN = [
  'bucket',
  'filenamePrefix',
  'filenameSuffix',
  'filenameDatetimeFormat',
  'textConfig',
  'avroConfig',
  'parquetConfig',
  'maxDuration',
  'maxBytes',
  'maxMessages',
  'shards',
  'serviceAccountEmail',
  'state',
];

export function parseObjectStorageConfig(raw: unknown): ObjectStorageConfig {
  if (!raw || typeof raw !== 'object') throw new InvalidArgumentError(F, 'must be an object');
  const c = raw as Record<string, unknown>;
  for (const k of Object.keys(c)) if (!KNOWN.includes(k)) throw new UnknownFieldError(`${F}.${k}`, [k], KNOWN);
  const text = (k: string) => {
    if (c[k] === undefined) return '';
    if (typeof c[k] !== 'string') throw new InvalidArgumentError(`${F}.${k}`, 'must be a string');
    return c[k];
  };
  const filenameSuffix = text('filenameSuffix');
  if (filenameSuffix.endsWith('/'))
    throw new InvalidArgumentError(`${F}.filenameSuffix`, `must not end in "/", got ${JSON.stringify(filenameSuffix)}`);
  if (filenameSuffix.includes('/')) checkPrefix(`${F}.filenameSuffix`, filenameSuffix);
  const filenameDatetimeFormat = text('filenameDatetimeFormat') || DEFAULT_DATETIME_FORMAT;
  parseDatetimeFormat(`${F}.filenameDatetimeFormat`, filenameDatetimeFormat);

  const formats = (['textConfig', 'avroConfig', 'parquetConfig'] as const).filter((k) => c[k] !== undefined && c[k] !== null);
  if (formats.length > 1)
    throw new InvalidArgumentError(
      `${F}.${formats[1]}`,
      `only one of textConfig, avroConfig, parquetConfig may be set, got ${formats.join(' and ')}`,
    );
  let format: OutputFormat = { kind: 'text' };
  if (formats[0] === 'avroConfig') {
    const a = formatSection(c, 'avroConfig', { writeMetadata: 'boolean', useTopicSchema: 'boolean' });
    format = { kind: 'avro', writeMetadata: a.writeMetadata === true, ...(a.useTopicSchema === true ? { useTopicSchema: true } : {}) };
  } else if (formats[0] === 'parquetConfig') {
    const p = formatSection(c, 'parquetConfig', { writeMetadata: 'boolean', compression: ['UNCOMPRESSED', 'GZIP', 'SNAPPY'] });
    format = { kind: 'parquet', writeMetadata: p.writeMetadata === true, compression: (p.compression ?? 'SNAPPY') as 'SNAPPY' };
  } else if (formats[0] === 'textConfig') formatSection(c, 'textConfig', {});

  const maxDurationSeconds = checkRange(`${F}.maxDuration`, parseDuration(`${F}.maxDuration`, (c.maxDuration as string) ?? 300), 60, 600);
  const maxBytes = integer(c.maxBytes ?? 10 * 1024 ** 3);
  if (!Number.isInteger(maxBytes) || maxBytes < 1000 || maxBytes > 10 * 1024 ** 3) {
    throw new InvalidArgumentError(
      `${F}.maxBytes`,
      `must be an integer between 1000 (1 KB) and ${10 * 1024 ** 3} (10 GiB), got ${JSON.stringify(c.maxBytes)}`,
    );
  }
  const maxMessages = int64(c.maxMessages ?? Number.MAX_SAFE_INTEGER);
  if (!Number.isInteger(maxMessages) || maxMessages < 1000) {
    throw new InvalidArgumentError(
      `${F}.maxMessages`,
      `must be an integer between 1000 and 2^63 - 1 (past 2^53 - 1 as a string of digits: a number that large is not exact), got ${JSON.stringify(c.maxMessages)}`,
    );
  }
  // Unset (or empty, as proto3 sends it unset): Pub/Sub's own service agent.
  if (c.serviceAccountEmail !== undefined && c.serviceAccountEmail !== '')
    checkServiceAccountEmail(`${F}.serviceAccountEmail`, c.serviceAccountEmail);
  const shards = integer(c.shards ?? 1);
  if (!Number.isInteger(shards) || shards < 1 || shards > 64)
    throw new InvalidArgumentError(`${F}.shards`, `must be an integer between 1 and 64, got ${JSON.stringify(c.shards)}`);
  const filenamePrefix = checkPrefix(`${F}.filenamePrefix`, text('filenamePrefix'));
  checkNameLength(filenamePrefix, filenameSuffix, filenameDatetimeFormat);
  checkNameSegments(filenamePrefix, filenameSuffix, filenameDatetimeFormat);
  // The bucket last, as bigqueryConfig's table: set aside by a job file's check, it is then missing, which
  // ends the checking, so a bad bucket checked first hid every other problem of the section.
  if (typeof c.bucket !== 'string' || !/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(c.bucket)) {
    throw new InvalidArgumentError(
      `${F}.bucket`,
      c.bucket === undefined
        ? 'is required: the bucket to write to'
        : `must be a bucket name (3-63 lowercase letters, digits, "." and "-"), got ${JSON.stringify(c.bucket)}`,
    );
  }
  return {
    bucket: c.bucket,
    filenamePrefix,
    filenameSuffix,
    filenameDatetimeFormat,
    format,
    maxDurationSeconds,
    maxBytes,
    maxMessages,
    shards,
  };
}

/**
 * The datetime format may hold "/" too: with the prefix it must not make a name that starts with "/",
 * holds "//" (an empty path segment) or lies in Orderly's own folder, which the prefix and suffix alone
 * are refused for (checkPrefix).
 */
function checkNameSegments(prefix: string, suffix: string, datetimeFormat: string): void {
  const name = objectNamer(prefix, suffix, datetimeFormat).name(new Date(0), uniqueId(1, newWriterTag()));
  const wrong = name.startsWith('/')
    ? 'that start with "/"'
    : name.includes('//')
      ? 'with "//" (an empty path segment)'
      : name.startsWith(RESERVED_PREFIX)
        ? `that start with "${RESERVED_PREFIX}" (Orderly keeps fleet manifests there)`
        : undefined;
  if (!wrong) return;
  throw new InvalidArgumentError(
    `${F}.filenameDatetimeFormat`,
    `${JSON.stringify(datetimeFormat)} after the prefix ${JSON.stringify(prefix)} makes object names ${wrong}, e.g. ${JSON.stringify(name)}`,
  );
}

/** S3's and Cloud Storage's longest object name, in bytes of UTF-8. */
const MAX_OBJECT_NAME_BYTES = 1024;

/**
 * Refuses a prefix and suffix whose object names would be too long for the bucket: every upload would
 * fail, and the export would stall retrying them.
 */
function checkNameLength(prefix: string, suffix: string, datetimeFormat: string): void {
  const longest = objectNamer(prefix, suffix, datetimeFormat).name(new Date(0), uniqueId(Number.MAX_SAFE_INTEGER, newWriterTag()));
  const bytes = Buffer.byteLength(longest);
  if (bytes <= MAX_OBJECT_NAME_BYTES) return;
  const field = Buffer.byteLength(suffix) > Buffer.byteLength(prefix) ? 'filenameSuffix' : 'filenamePrefix';
  const own = bytes - Buffer.byteLength(prefix) - Buffer.byteLength(suffix);
  throw new InvalidArgumentError(
    `${F}.${field}`,
    `makes object names of ${bytes} bytes (with the ${own} bytes of the datetime and unique id between prefix and suffix); S3 and Cloud Storage allow at most ${MAX_OBJECT_NAME_BYTES}`,
  );
}

/** A number, or an int64 as Pub/Sub's JSON writes it (a string of digits); anything else is NaN (refused by the caller's check). */
function integer(value: unknown): number {
  if (typeof value === 'number') return value;
  return typeof value === 'string' && /^-?\d+$/.test(value) ? Number(value) : NaN;
}

const INT64_MAX = 2n ** 63n - 1n;

/**
 * An int64 setting (the API's maxMessages): a number only while exact (a YAML 9223372036854775807 is
 * already another number), else decimal digits within int64, as the API keeps them; NaN otherwise. Past
 * 2^53 the limit is never reached, so the Number it becomes serves the writer as well.
 */
function int64(value: unknown): number {
  if (typeof value === 'number') return Number.isSafeInteger(value) ? value : NaN;
  return typeof value === 'string' && /^-?\d+$/.test(value) && BigInt(value) <= INT64_MAX ? Number(value) : NaN;
}

/**
 * A format's section (textConfig, avroConfig, parquetConfig): an object with only `fields`, each a boolean or
 * one of the listed words. Checked whole, so a typo or a wrong type is refused instead of falling back to
 * the default (a `writeMetadata: "yes"` would have written files without the metadata columns).
 */
function formatSection(c: Record<string, unknown>, name: string, fields: Record<string, 'boolean' | string[]>): Record<string, unknown> {
  const section = c[name];
  if (typeof section !== 'object' || section === null || Array.isArray(section))
    throw new InvalidArgumentError(`${F}.${name}`, `must be an object, got ${JSON.stringify(section)}`);
  const known = Object.keys(fields);
  for (const [k, v] of Object.entries(section)) {
    const kind = fields[k];
    if (kind === undefined) throw new UnknownFieldError(`${F}.${name}.${k}`, [name, k], known);
    if (v === undefined || v === null) continue;
    if (kind === 'boolean' && typeof v !== 'boolean')
      throw new InvalidArgumentError(`${F}.${name}.${k}`, `must be true or false, got ${JSON.stringify(v)}`);
    if (Array.isArray(kind) && !kind.includes(v as string))
      throw new InvalidArgumentError(
        `${F}.${name}.${k}`,
        `must be ${kind.slice(0, -1).join(', ')} or ${kind.at(-1)}, got ${JSON.stringify(v)}`,
      );
  }
  return section as Record<string, unknown>;
}
