import {
  blobValue,
  dateValue,
  DuckDBTypeId,
  listValue,
  structValue,
  timestampTZValue,
  timestampValue,
  type DuckDBType,
  type DuckDBValue,
} from '@duckdb/node-api';

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
};

export interface ConversionOptions {
  /** Ignore object fields with no matching STRUCT entry (bigqueryConfig.dropUnknownFields). */
  dropUnknownFields: boolean;
}

/**
 * Converts one JSON value to what the DuckDB appender takes for a column of `type`, as BigQuery's
 * table-schema mapping does: integers from JSON integers or integer strings (range-checked), floats from
 * numbers or numeric strings, booleans, strings, TIMESTAMP from ISO 8601 strings or epoch microseconds,
 * DATE from `YYYY-MM-DD`, BLOB from base64, JSON columns from any value, STRUCT from objects, LIST from
 * arrays. Anything else raises ConversionError naming the field.
 */
export function toColumnValue(value: unknown, type: DuckDBType, path: string, options: ConversionOptions): DuckDBValue {
  if (value === null || value === undefined) return null;
  if (type.alias === 'JSON') return JSON.stringify(value);
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
    case DuckDBTypeId.UBIGINT: {
      let n: bigint;
      if (typeof value === 'number' && Number.isInteger(value)) n = BigInt(value);
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
      const n = typeof value === 'number' ? value : typeof value === 'string' && value.trim() !== '' ? Number(value) : NaN;
      if (!Number.isFinite(n)) throw fail('a number');
      return n;
    }
    case DuckDBTypeId.DECIMAL: {
      if (typeof value !== 'number' && !(typeof value === 'string' && /^-?\d+(\.\d+)?$/.test(value.trim()))) throw fail('a number');
      return Number(value);
    }
    case DuckDBTypeId.VARCHAR:
      if (typeof value === 'string') return value;
      if (typeof value === 'number' || typeof value === 'boolean') return String(value);
      throw fail('a string');
    case DuckDBTypeId.TIMESTAMP:
    case DuckDBTypeId.TIMESTAMP_TZ: {
      const micros = timestampMicros(value);
      if (micros === undefined) throw fail('an ISO 8601 timestamp or epoch microseconds');
      return type.typeId === DuckDBTypeId.TIMESTAMP ? timestampValue(micros) : timestampTZValue(micros);
    }
    case DuckDBTypeId.DATE: {
      const m = typeof value === 'string' ? /^(\d{4})-(\d{2})-(\d{2})$/.exec(value) : null;
      const ms = m ? Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])) : NaN;
      if (!Number.isFinite(ms) || new Date(ms).toISOString().slice(0, 10) !== value) throw fail('a date (YYYY-MM-DD)');
      return dateValue(Math.round(ms / 86_400_000));
    }
    case DuckDBTypeId.BLOB:
      if (typeof value !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(value)) throw fail('base64 bytes');
      return blobValue(Buffer.from(value, 'base64'));
    case DuckDBTypeId.STRUCT: {
      if (typeof value !== 'object' || Array.isArray(value)) throw fail('an object');
      const struct = type;
      const entries: Record<string, DuckDBValue> = {};
      const fields = value as Record<string, unknown>;
      struct.entryNames.forEach((name, i) => {
        entries[name] = toColumnValue(fields[name], struct.entryTypes[i]!, `${path}.${name}`, options);
      });
      if (!options.dropUnknownFields) {
        const unknown = Object.keys(fields).filter((k) => !struct.entryNames.includes(k));
        if (unknown.length)
          throw new ConversionError(`${path}.${unknown[0]}`, 'no such field in the STRUCT column (set dropUnknownFields to ignore it)');
      }
      return structValue(entries);
    }
    case DuckDBTypeId.LIST: {
      if (!Array.isArray(value)) throw fail('an array');
      const item = type.valueType;
      return listValue(value.map((v, i) => toColumnValue(v, item, `${path}[${i}]`, options)));
    }
    default:
      throw new ConversionError(path, `Orderly cannot write JSON into a ${type.toString()} column`);
  }
}

function timestampMicros(value: unknown): bigint | undefined {
  if (typeof value === 'number' && Number.isInteger(value)) return BigInt(value);
  if (typeof value !== 'string' || !/^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?$/.test(value.trim()))
    return undefined;
  const text = value.trim();
  const ms = Date.parse(/[Zz]|[+-]\d{2}:?\d{2}$/.test(text) || text.length === 10 ? text : `${text}Z`);
  if (!Number.isFinite(ms)) return undefined;
  // Keep sub-millisecond digits that Date drops.
  const fraction = /\.(\d+)/.exec(text)?.[1] ?? '';
  const extraMicros = fraction.length > 3 ? Number(fraction.slice(3, 6).padEnd(3, '0')) : 0;
  return BigInt(ms) * 1000n + BigInt(extraMicros);
}

function describe(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}
