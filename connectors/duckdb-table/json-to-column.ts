import {
  arrayValue,
  blobValue,
  dateValue,
  decimalValue,
  DuckDBTypeId,
  listValue,
  mapValue,
  structValue,
  timestampTZValue,
  timestampValue,
  timestampMillisValue,
  timestampNanosValue,
  timestampSecondsValue,
  timeValue,
  uuidValue,
  type DuckDBStructType,
  type DuckDBType,
  type DuckDBValue,
} from '@duckdb/node-api';
import { DECIMAL_TEXT, isJsonObject, NumberText, type JsonValue } from '../../src/schema/json-text.js';
import { timestampInRange } from '../../src/schema/type-mapping.js';

/** A value that does not fit its column; fails that message only. */
export class ConversionError extends Error {
  constructor(
    readonly path: string,
    detail: string,
  ) {
    super(`${path}: ${detail}`);
    this.name = 'ConversionError';
  }
}

const INTEGER_RANGES: Partial<Record<DuckDBTypeId, [bigint, bigint]>> = {
  [DuckDBTypeId.TINYINT]: [-128n, 127n],
  [DuckDBTypeId.SMALLINT]: [-32768n, 32767n],
  [DuckDBTypeId.INTEGER]: [-2147483648n, 2147483647n],
  [DuckDBTypeId.BIGINT]: [-(2n ** 63n), 2n ** 63n - 1n],
  [DuckDBTypeId.HUGEINT]: [-(2n ** 127n), 2n ** 127n - 1n],
  [DuckDBTypeId.UTINYINT]: [0n, 255n],
  [DuckDBTypeId.USMALLINT]: [0n, 65535n],
  [DuckDBTypeId.UINTEGER]: [0n, 4294967295n],
  [DuckDBTypeId.UBIGINT]: [0n, 2n ** 64n - 1n],
  [DuckDBTypeId.UHUGEINT]: [0n, 2n ** 128n - 1n],
};

export interface ConversionOptions {
  /** Ignore object fields with no matching STRUCT entry (bigqueryConfig.dropUnknownFields). */
  dropUnknownFields: boolean;
}

/** Standard base64, padded: what BigQuery takes for BYTES in JSON. */
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
/**
 * DuckDB's TIMESTAMP_NS range, 1677-09-22 to 2262-04-11 23:47:16.854775806: earlier nanoseconds fit its
 * 64 bits but the table could not be read back ("Date out of range in timestamp_ns conversion").
 */
const MIN_TIMESTAMP_NS = -9_223_286_400_000_000_000n;
const MAX_TIMESTAMP_NS = 2n ** 63n - 2n;
/** The canonical UUID text only: DuckDB's cast would also take braces or no dashes, forms a producer's bug makes. */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Converts one JSON value (as parseJsonText reads it: integers past 2^53 as bigints) to what the DuckDB
 * appender takes for a column of `type`, as BigQuery's table-schema mapping does: integers from JSON
 * integers or integer strings (range-checked), floats from numbers or decimal strings (in the column's
 * range), DECIMAL exactly from numbers or decimal strings, booleans, strings, TIMESTAMP (and TIMESTAMP_S,
 * _MS, _NS, to their precision) from ISO 8601 strings of real dates or epoch microseconds, DATE from
 * `YYYY-MM-DD`, TIME from `HH:MM[:SS[.ffffff]]`, BLOB from base64, ENUM from its values, UUID from its
 * canonical text, JSON columns from any value, STRUCT and MAP from objects, LIST and fixed-size ARRAY from
 * arrays. Anything else raises ConversionError naming the field, so the message fails alone rather than
 * the sink.
 */
export function toColumnValue(value: unknown, type: DuckDBType, path: string, options: ConversionOptions): DuckDBValue {
  if (value === null || value === undefined) return null;
  if (type.alias === 'JSON') return jsonText(value);
  const fail = (expected: string) =>
    new ConversionError(path, `expected ${expected} for a ${type.toString()} column, got ${describe(value)}`);
  switch (type.typeId) {
    case DuckDBTypeId.BOOLEAN:
      if (typeof value !== 'boolean') throw fail('true or false');
      return value;
    case DuckDBTypeId.TINYINT:
    case DuckDBTypeId.SMALLINT:
    case DuckDBTypeId.INTEGER:
    case DuckDBTypeId.BIGINT:
    case DuckDBTypeId.HUGEINT:
    case DuckDBTypeId.UTINYINT:
    case DuckDBTypeId.USMALLINT:
    case DuckDBTypeId.UINTEGER:
    case DuckDBTypeId.UBIGINT:
    case DuckDBTypeId.UHUGEINT: {
      let n: bigint;
      if (typeof value === 'bigint') n = value;
      else if (typeof value === 'number' && Number.isInteger(value)) n = BigInt(value);
      else if (typeof value === 'string' && /^-?\d+$/.test(value.trim())) n = BigInt(value.trim());
      else throw fail('an integer');
      const [min, max] = INTEGER_RANGES[type.typeId]!;
      if (n < min || n > max) throw new ConversionError(path, `${n} is out of range for a ${type.toString()} column (${min} to ${max})`);
      return type.typeId === DuckDBTypeId.TINYINT ||
        type.typeId === DuckDBTypeId.SMALLINT ||
        type.typeId === DuckDBTypeId.INTEGER ||
        type.typeId === DuckDBTypeId.UTINYINT ||
        type.typeId === DuckDBTypeId.USMALLINT ||
        type.typeId === DuckDBTypeId.UINTEGER
        ? Number(n)
        : n;
    }
    case DuckDBTypeId.FLOAT:
    case DuckDBTypeId.DOUBLE: {
      const n =
        typeof value === 'number' || typeof value === 'bigint'
          ? Number(value)
          : value instanceof NumberText
            ? Number(value.text)
            : typeof value === 'string' && DECIMAL_TEXT.test(value.trim())
              ? Number(value.trim())
              : NaN;
      if (Number.isNaN(n)) throw fail('a number');
      if (!Number.isFinite(type.typeId === DuckDBTypeId.FLOAT ? Math.fround(n) : n))
        throw new ConversionError(path, `${describe(value)} is out of range for a ${type.toString()} column`);
      return n;
    }
    case DuckDBTypeId.DECIMAL: {
      // A number literal a double would change comes as its text (NumberText): written exactly.
      const text =
        typeof value === 'number' || typeof value === 'bigint'
          ? String(value)
          : value instanceof NumberText
            ? value.text
            : typeof value === 'string'
              ? value.trim()
              : '';
      if (!DECIMAL_TEXT.test(text)) throw fail('a number');
      const { width, scale } = type;
      const unscaled = scaledDecimal(text, scale, width);
      if (unscaled === undefined || (unscaled < 0n ? -unscaled : unscaled) >= 10n ** BigInt(width))
        throw new ConversionError(path, `${text} does not fit a ${type.toString()} column (${width} digits, ${scale} after the point)`);
      return decimalValue(unscaled, width, scale);
    }
    case DuckDBTypeId.VARCHAR:
      if (typeof value === 'string') return value;
      if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean') return String(value);
      if (value instanceof NumberText) return value.text;
      throw fail('a string');
    case DuckDBTypeId.TIMESTAMP:
    case DuckDBTypeId.TIMESTAMP_TZ:
    case DuckDBTypeId.TIMESTAMP_S:
    case DuckDBTypeId.TIMESTAMP_MS:
    case DuckDBTypeId.TIMESTAMP_NS: {
      const micros = timestampMicros(value);
      if (micros === undefined) throw fail('an ISO 8601 timestamp of a real date and time, or epoch microseconds');
      if (!timestampInRange(micros)) throw outOfRange(value, type, path);
      switch (type.typeId) {
        case DuckDBTypeId.TIMESTAMP:
          return timestampValue(micros);
        case DuckDBTypeId.TIMESTAMP_TZ:
          return timestampTZValue(micros);
        // Digits past the column's precision are dropped, as TIMESTAMP drops those past the microsecond.
        case DuckDBTypeId.TIMESTAMP_S:
          return timestampSecondsValue(floorDivide(micros, 1_000_000n));
        case DuckDBTypeId.TIMESTAMP_MS:
          return timestampMillisValue(floorDivide(micros, 1000n));
        default: {
          const nanos = micros * 1000n + nanosPastMicros(value);
          if (nanos < MIN_TIMESTAMP_NS || nanos > MAX_TIMESTAMP_NS) throw outOfRange(value, type, path);
          return timestampNanosValue(nanos);
        }
      }
    }
    case DuckDBTypeId.DATE: {
      const m = typeof value === 'string' ? /^(\d{4})-(\d{2})-(\d{2})$/.exec(value) : null;
      const ms = m ? calendarMs(Number(m[1]), Number(m[2]), Number(m[3])) : undefined;
      if (ms === undefined) throw fail('a date (YYYY-MM-DD)');
      return dateValue(Math.round(ms / 86_400_000));
    }
    case DuckDBTypeId.TIME: {
      const micros = timeOfDayMicros(value);
      if (micros === undefined) throw fail('a time of day (HH:MM[:SS[.ffffff]])');
      return timeValue(micros);
    }
    case DuckDBTypeId.BLOB:
      if (typeof value !== 'string' || !BASE64.test(value)) throw fail('base64 bytes (standard alphabet, padded)');
      return blobValue(Buffer.from(value, 'base64'));
    case DuckDBTypeId.ENUM:
      if (typeof value !== 'string' || type.valueIndexes[value] === undefined) {
        // An ENUM may have millions of members: the message names a few, not the whole type.
        const some = type.values.slice(0, 5).map((v) => JSON.stringify(v));
        throw new ConversionError(
          path,
          `expected one of the ENUM column's ${type.values.length} values (${some.join(', ')}${type.values.length > 5 ? ', ...' : ''}), got ${describe(value)}`,
        );
      }
      return value;
    case DuckDBTypeId.UUID:
      if (typeof value !== 'string' || !UUID.test(value)) throw fail('a UUID (8-4-4-4-12 hexadecimal digits)');
      return uuidValue(BigInt(`0x${value.replaceAll('-', '')}`));
    case DuckDBTypeId.STRUCT: {
      if (!isJsonObject(value as JsonValue)) throw fail('an object');
      const struct = type;
      const entries: Record<string, DuckDBValue> = {};
      // Field names in any letter case, as for columns (BigQuery's and DuckDB's names are case-insensitive):
      // `City` fills the entry city instead of being an unknown field, which dropUnknownFields left NULL.
      const given = new Map<number, string>();
      for (const field of Object.keys(value)) {
        const i = entryIndexes(struct).get(field.toLowerCase());
        if (i === undefined) {
          if (options.dropUnknownFields) continue;
          throw new ConversionError(`${path}.${field}`, 'no such field in the STRUCT column (set dropUnknownFields to ignore it)');
        }
        const other = given.get(i);
        if (other !== undefined)
          throw new ConversionError(`${path}.${field}`, `fields "${other}" and "${field}" both name the entry "${struct.entryNames[i]}"`);
        given.set(i, field);
      }
      struct.entryNames.forEach((name, i) => {
        const field = given.get(i);
        const v = field === undefined ? undefined : (value as Record<string, unknown>)[field];
        entries[name] = toColumnValue(v, struct.entryTypes[i]!, `${path}.${field ?? name}`, options);
      });
      return structValue(entries);
    }
    case DuckDBTypeId.MAP: {
      if (!isJsonObject(value as JsonValue)) throw fail('an object');
      const { keyType, valueType } = type;
      // Two names of one key ("1" and "01" for an INTEGER key) would make a MAP DuckDB refuses to build.
      const fieldOfKey = new Map<string, string>();
      return mapValue(
        Object.entries(value).map(([field, v]) => {
          const key = toColumnValue(field, keyType, `${path} key ${JSON.stringify(field)}`, options);
          const other = fieldOfKey.get(String(key));
          if (other !== undefined)
            throw new ConversionError(path, `keys ${JSON.stringify(other)} and ${JSON.stringify(field)} are both the key ${String(key)}`);
          fieldOfKey.set(String(key), field);
          return { key, value: toColumnValue(v, valueType, `${path}[${JSON.stringify(field)}]`, options) };
        }),
      );
    }
    case DuckDBTypeId.LIST:
    case DuckDBTypeId.ARRAY: {
      if (!Array.isArray(value)) throw fail('an array');
      // The appender refuses another length too, but with the whole batch in its transaction ("Failed to
      // cast value", no data error: it would stall the export); checked here, the message fails alone.
      if (type.typeId === DuckDBTypeId.ARRAY && value.length !== type.length)
        throw new ConversionError(path, `a ${type.toString()} column takes exactly ${type.length} elements, got ${value.length}`);
      const item = type.valueType;
      const items = value.map((v, i) => toColumnValue(v, item, `${path}[${i}]`, options));
      return type.typeId === DuckDBTypeId.LIST ? listValue(items) : arrayValue(items);
    }
    default:
      throw new ConversionError(path, `Orderly cannot write JSON into a ${type.toString()} column`);
  }
}

/** A STRUCT type's entry positions by lower-case name (DuckDB refuses two entries differing only in case), built once per column type. */
const foldedEntries = new WeakMap<DuckDBStructType, Map<string, number>>();
function entryIndexes(struct: DuckDBStructType): Map<string, number> {
  let byName = foldedEntries.get(struct);
  if (!byName) foldedEntries.set(struct, (byName = new Map(struct.entryNames.map((name, i) => [name.toLowerCase(), i]))));
  return byName;
}

/**
 * Microseconds since midnight of a BigQuery TIME string (`HH:MM[:SS[.ffffff]]`, 00:00 to 23:59:59.999999),
 * digits past the microsecond dropped as for TIMESTAMP; undefined for anything else (every such value had
 * failed its message: the TIME column was not taken at all).
 */
function timeOfDayMicros(value: unknown): bigint | undefined {
  const parts = typeof value === 'string' ? /^(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?$/.exec(value.trim()) : null;
  if (!parts) return undefined;
  const [, h, mi, sec = '0', fraction = ''] = parts;
  if (Number(h) > 23 || Number(mi) > 59 || Number(sec) > 59) return undefined;
  const seconds = (Number(h) * 60 + Number(mi)) * 60 + Number(sec);
  return BigInt(seconds) * 1_000_000n + BigInt(fraction.slice(0, 6).padEnd(6, '0'));
}

function timestampMicros(value: unknown): bigint | undefined {
  if (typeof value === 'bigint') return value;
  if (typeof value === 'number' && Number.isInteger(value)) return BigInt(value);
  const parts =
    typeof value === 'string'
      ? /^(\d{4})-(\d{2})-(\d{2})([T ](\d{2}):(\d{2})(:(\d{2})(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?$/.exec(value.trim())
      : null;
  if (!parts) return undefined;
  // Date.parse rolls an impossible date over (February 30th becomes March 1st): check the calendar first.
  const [, y, mo, d, , h = '0', mi = '0', , sec = '0'] = parts;
  if (calendarMs(Number(y), Number(mo), Number(d)) === undefined || Number(h) > 23 || Number(mi) > 59 || Number(sec) > 59) return undefined;
  const text = (value as string).trim();
  const ms = Date.parse(/[Zz]|[+-]\d{2}:?\d{2}$/.test(text) || text.length === 10 ? text : `${text}Z`);
  if (!Number.isFinite(ms)) return undefined;
  // Keep sub-millisecond digits that Date drops.
  const fraction = /\.(\d+)/.exec(text)?.[1] ?? '';
  const extraMicros = fraction.length > 3 ? Number(fraction.slice(3, 6).padEnd(3, '0')) : 0;
  return BigInt(ms) * 1000n + BigInt(extraMicros);
}

/** Built only when thrown: a closure made per cell would cost every TIMESTAMP cell of the export. */
function outOfRange(value: unknown, type: DuckDBType, path: string): ConversionError {
  return new ConversionError(path, `${describe(value)} is out of range for a ${type.toString()} column`);
}

/**
 * The nanoseconds a timestamp string gives past its microsecond (fraction digits 7 to 9; later ones are
 * dropped); none for epoch microseconds.
 */
function nanosPastMicros(value: unknown): bigint {
  const fraction = typeof value === 'string' ? (/\.(\d+)/.exec(value)?.[1] ?? '') : '';
  return BigInt(fraction.slice(6, 9).padEnd(3, '0'));
}

/** a / b rounded down (bigint division rounds toward zero): 1969-12-31T23:59:59.5 is in the second 23:59:59, not 1970's first. */
function floorDivide(a: bigint, b: bigint): bigint {
  const q = a / b;
  return a % b < 0n ? q - 1n : q;
}

/** Milliseconds since 1970 of a real calendar date (proleptic Gregorian), or undefined for one like February 30th. */
function calendarMs(year: number, month: number, day: number): number | undefined {
  const date = new Date(0);
  // setUTCFullYear, not Date.UTC: Date.UTC reads years 0-99 as 1900-1999.
  date.setUTCFullYear(year, month - 1, day);
  if (date.getUTCFullYear() !== year || date.getUTCMonth() !== month - 1 || date.getUTCDate() !== day) return undefined;
  return date.getTime();
}

/**
 * A decimal text as an integer scaled by 10^scale, rounded half away from zero as DuckDB casts it, or
 * undefined when it has more than `width` digits before rounding could matter. The power of ten is bounded
 * by the digits and the width, not the exponent: `1e-100000000` had the writer compute 10^100000000 (8 s
 * with every subscription of the process waiting), and `1e-1000000000` threw RangeError, failing the sink
 * on every retry instead of the message.
 */
function scaledDecimal(text: string, scale: number, width: number): bigint | undefined {
  const [, sign, whole = '', fraction = '', exponent = '0'] = /^(-?)(\d*)\.?(\d*)(?:[eE]([+-]?\d+))?$/.exec(text)!;
  const digits = `${whole}${fraction}`.replace(/^0+(?=\d)/, '') || '0';
  if (digits === '0') return 0n;
  // The digits' value is digits * 10^(exponent - fraction.length); scaled, the power is shift.
  const shift = Number(exponent) - fraction.length + scale;
  let unscaled: bigint;
  if (shift >= 0) {
    // Nonzero digits times 10^shift have at least shift + 1 digits.
    if (shift >= width) return undefined;
    unscaled = BigInt(digits) * 10n ** BigInt(shift);
  } else if (-shift > digits.length) {
    // Less than a tenth of the last place: rounds to zero.
    unscaled = 0n;
  } else {
    const divisor = 10n ** BigInt(-shift);
    const n = BigInt(digits);
    unscaled = n / divisor + ((n % divisor) * 2n >= divisor ? 1n : 0n);
  }
  return sign ? -unscaled : unscaled;
}

/** JSON text of a value, numbers a double would change (bigints, NumberText) written as given, every digit. */
function jsonText(value: unknown): string {
  const marks: string[] = [];
  // A random tag: no string in the value can pass for a placeholder.
  const tag = `number-${Math.random().toString(36).slice(2)}-`;
  const text = JSON.stringify(value, (_k, v: unknown) => {
    if (typeof v !== 'bigint' && !(v instanceof NumberText)) return v;
    marks.push(typeof v === 'bigint' ? v.toString() : v.text);
    return `${tag}${marks.length - 1}`;
  });
  return marks.length ? text.replace(new RegExp(`"${tag}(\\d+)"`, 'g'), (_m, i: string) => marks[Number(i)]!) : text;
}

/** jsonText, cut short: JSON.stringify threw on a bigint inside an object or array, failing the sink instead of the message. */
function describe(value: unknown): string {
  const text = jsonText(value);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}
