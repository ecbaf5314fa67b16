import {
  blobValue,
  dateValue,
  decimalValue,
  intervalValue,
  listValue,
  mapValue,
  structValue,
  timestampTZValue,
  timeValue,
  type DuckDBValue,
} from '@duckdb/node-api';
import avro from 'avsc';
import protobuf from 'protobufjs';
import { OrderlyError } from '../core/errors.js';
import { quoteIdent } from '../duckdb/sql.js';
import { logicalOf, underlying, type AvroType } from './avro-types.js';
import type { DecodedMessage } from './message-validation.js';
import { enumTypeOf, hasPresence, mapKeyType, messageTypeOf, realOneof, type ProtoMapKey, type ProtoValue } from './proto-value.js';
import type { CompiledSchema } from './schema-definition.js';
import type { TypeShape } from './nested-field-drop.js';

/**
 * Pub/Sub's topic-schema -> BigQuery mapping (bigqueryConfig.useTopicSchema), adapted to DuckDB: one
 * column per top-level field of the Avro record or protobuf message, and each decoded message as one
 * row of DuckDB-appendable values. The table of types, and where it differs from BigQuery's and why,
 * is docs/schemas.md ("Topic schema to DuckDB columns"); keep the two in step.
 *
 * What BigQuery cannot map, Orderly refuses too (UnmappableSchemaError): an Avro union other than
 * [null, T], a protobuf oneof, a recursive type. A value that does not fit its column (a decimal with
 * more digits than its precision, a time of day past 24:00) fails that message only (ColumnValueError).
 */
export interface MappedColumn {
  name: string;
  /** DuckDB SQL type, identifiers quoted. */
  duckdbType: string;
  /** That type's parts, for a table whose column leaves out nested fields (dropUnknownFields). */
  shape: TypeShape;
  nullable: boolean;
  /**
   * A proto3 scalar without presence: unset is not on the wire, and neither is its default (0, "",
   * false), so a decoded default may be either.
   */
  implicitPresence: boolean;
}

export interface TableMapping {
  columns: MappedColumn[];
  /** One value per column, in column order. */
  row(decoded: DecodedMessage): DuckDBValue[];
}

export class UnmappableSchemaError extends OrderlyError {
  constructor(
    readonly path: string,
    detail: string,
  ) {
    super('FAILED_PRECONDITION', `the topic schema cannot be mapped to table columns at ${path}: ${detail}`);
  }
}

export class ColumnValueError extends Error {
  constructor(
    readonly path: string,
    detail: string,
  ) {
    super(`${path}: ${detail}`);
    this.name = 'ColumnValueError';
  }
}

/** A column type and how a decoded value becomes a DuckDB value of it. */
interface Mapped extends TypeShape {
  convert(value: unknown, path: string): DuckDBValue;
}

export function mapSchemaToTable(schema: CompiledSchema): TableMapping {
  const fields = schema.type === 'AVRO' ? avroColumns(schema.avro) : protoColumns(schema.message);
  return {
    columns: fields.map((f) => ({
      name: f.name,
      duckdbType: f.mapped.sql,
      shape: f.mapped,
      nullable: f.nullable,
      implicitPresence: f.implicitPresence === true,
    })),
    row(decoded) {
      if (decoded.type !== schema.type)
        throw new Error(`a ${decoded.type} message cannot fill columns mapped from a ${schema.type} schema`);
      const record = decoded.value as Record<string, unknown>;
      return fields.map((f) => {
        const value = record[f.name];
        return value === undefined || value === null ? null : f.mapped.convert(value, f.name);
      });
    },
  };
}

/** `"a" INTEGER NOT NULL, "b" VARCHAR, ...` for a CREATE TABLE. */
export function columnDefinitionsSql(columns: readonly MappedColumn[]): string {
  return columns.map((c) => `${quoteIdent(c.name)} ${c.duckdbType}${c.nullable ? '' : ' NOT NULL'}`).join(', ');
}

interface FieldColumn {
  name: string;
  mapped: Mapped;
  nullable: boolean;
  implicitPresence?: boolean;
}

const direct = (sql: string): Mapped => ({ sql, convert: (v) => v as DuckDBValue });
const BOOLEAN = direct('BOOLEAN');
const INTEGER = direct('INTEGER');
const BIGINT = direct('BIGINT');
const UINTEGER = direct('UINTEGER');
const UBIGINT = direct('UBIGINT');
const DOUBLE = direct('DOUBLE');
const VARCHAR = direct('VARCHAR');
const BLOB: Mapped = { sql: 'BLOB', convert: (v) => blobValue(v as Buffer) };

/** DuckDB names are case-insensitive: fields "id" and "ID" would be one column. */
function distinctNames(path: string, entries: FieldColumn[]): FieldColumn[] {
  const seen = new Map<string, string>();
  for (const e of entries) {
    const other = seen.get(e.name.toLowerCase());
    if (other !== undefined)
      throw new UnmappableSchemaError(path, `fields "${other}" and "${e.name}" differ only in case, which DuckDB names do not distinguish`);
    seen.set(e.name.toLowerCase(), e.name);
  }
  return entries;
}

function struct(path: string, entries: FieldColumn[]): Mapped {
  distinctNames(path, entries);
  return {
    sql: `STRUCT(${entries.map((e) => `${quoteIdent(e.name)} ${e.mapped.sql}`).join(', ')})`,
    parts: { kind: 'struct', entries: entries.map((e) => ({ name: e.name, shape: e.mapped })) },
    convert: (v, p) => {
      const value = v as Record<string, unknown>;
      // No prototype: a field named "__proto__" stays a field.
      const out = Object.create(null) as Record<string, DuckDBValue>;
      for (const e of entries) {
        const x = value[e.name];
        out[e.name] = x === undefined || x === null ? null : e.mapped.convert(x, `${p}.${e.name}`);
      }
      return structValue(out);
    },
  };
}

function list(item: Mapped): Mapped {
  return {
    sql: `${item.sql}[]`,
    parts: { kind: 'list', item },
    convert: (v, p) => listValue((v as unknown[]).map((x, i) => (x === null ? null : item.convert(x, `${p}[${i}]`)))),
  };
}

// ---- Avro ----

function avroColumns(type: AvroType): FieldColumn[] {
  if (!(type instanceof avro.types.RecordType)) {
    throw new UnmappableSchemaError('(top level)', `an Avro schema maps to columns only when it is a record, not ${type.typeName}`);
  }
  return distinctNames('(top level)', recordFields(type, '', new Set()));
}

function recordFields(type: avro.types.RecordType, path: string, visiting: Set<AvroType>): FieldColumn[] {
  if (visiting.has(type))
    throw new UnmappableSchemaError(path || '(top level)', `record ${type.name} contains itself; a column type cannot nest without end`);
  visiting.add(type);
  const columns = type.fields.map((f) => {
    const p = path ? `${path}.${f.name}` : f.name;
    const [mapped, nullable] = avroSlot(f.type, p, visiting);
    return { name: f.name, mapped, nullable };
  });
  visiting.delete(type);
  return columns;
}

/**
 * The column type of a field, array item or map value, and whether it is nullable: a [null, T] union
 * is a nullable T (its decoded value, `{branch: value}`, is unwrapped); other unions are unmappable.
 */
function avroSlot(type: AvroType, path: string, visiting: Set<AvroType>): [Mapped, boolean] {
  const u = underlying(type);
  // A field that is always null: BigQuery takes any NULLABLE column; VARCHAR is as good as any.
  if (u.typeName === 'null') return [VARCHAR, true];
  if (!(u instanceof avro.types.WrappedUnionType)) return [avroMapped(type, path, visiting), false];
  const others = u.types.filter((t) => t.typeName !== 'null');
  if (u.types.length !== 2 || others.length !== 1) {
    throw new UnmappableSchemaError(
      path,
      `a union maps to a column only as [null, T]; this one is [${u.types.map((t) => t.branchName).join(', ')}]`,
    );
  }
  const inner = avroMapped(others[0]!, path, visiting);
  return [{ sql: inner.sql, convert: (v, p) => inner.convert(Object.values(v as object)[0], p) }, true];
}

function avroMapped(type: AvroType, path: string, visiting: Set<AvroType>): Mapped {
  const logical = logicalOf(type);
  if (logical) {
    switch (logical.name) {
      case 'timestamp-micros':
        return { sql: 'TIMESTAMPTZ', convert: (v, p) => timestampColumn(v as bigint, p) };
      case 'timestamp-millis':
        return { sql: 'TIMESTAMPTZ', convert: (v, p) => timestampColumn((v as bigint) * 1000n, p) };
      case 'date':
        return { sql: 'DATE', convert: (v) => dateValue(v as number) };
      case 'time-micros':
        return { sql: 'TIME', convert: (v, p) => timeOfDay(v as bigint, p) };
      case 'time-millis':
        return { sql: 'TIME', convert: (v, p) => timeOfDay(BigInt(v as number) * 1000n, p) };
      case 'duration':
        return { sql: 'INTERVAL', convert: (v, p) => duration(v as Buffer, p) };
      case 'decimal':
        return decimal(logical.precision!, logical.scale!);
      default:
        break; // uuid, local-timestamp-*: BigQuery maps them as their underlying type, and so does Orderly
    }
  }
  const u = underlying(type);
  if (u instanceof avro.types.RecordType) return struct(path, recordFields(u, path, visiting));
  if (u instanceof avro.types.ArrayType) return list(avroSlot(u.itemsType, `${path}[]`, visiting)[0]);
  if (u instanceof avro.types.MapType) {
    const [value] = avroSlot(u.valuesType as AvroType, `${path}{}`, visiting);
    return {
      sql: `MAP(VARCHAR, ${value.sql})`,
      parts: { kind: 'map', key: VARCHAR, value },
      convert: (v, p) =>
        mapValue(
          Object.entries(v as Record<string, unknown>).map(([key, x]) => ({
            key,
            value: x === null ? null : value.convert(x, `${p}[${JSON.stringify(key)}]`),
          })),
        ),
    };
  }
  switch (u.typeName) {
    case 'boolean':
      return BOOLEAN;
    case 'int':
      return INTEGER;
    case 'abstract:long':
      return BIGINT;
    case 'float':
    case 'double':
      return DOUBLE;
    case 'bytes':
    case 'fixed':
      return BLOB;
    case 'string':
    case 'enum': // the symbol (see docs/schemas.md: BigQuery writes an INTEGER)
      return VARCHAR;
    default:
      throw new UnmappableSchemaError(path, `Avro type ${u.typeName} has no column type`);
  }
}

/**
 * DuckDB's timestamps, 290309-12-22 (BC) 00:00:00 to 294247-01-10 04:00:54.775806, in microseconds from
 * 1970. The 64 bits reach a little earlier (their extremes are ±infinity), but a value stored there could
 * not be read back as text ("Date out of range in timestamp conversion"), nor at all from a TIMESTAMP_MS.
 */
const MIN_MICROS = -9_223_372_022_400_000_000n;
const MAX_MICROS = 2n ** 63n - 2n;

/** Whether DuckDB has a timestamp this many microseconds from 1970. */
export function timestampInRange(micros: bigint): boolean {
  return micros >= MIN_MICROS && micros <= MAX_MICROS;
}

/**
 * A TIMESTAMPTZ cell; past DuckDB's range (a long the schema allows, times 1000 for millis) the message
 * fails, where the appender would fail the whole batch, or store a long's maximum as infinity.
 */
function timestampColumn(micros: bigint, path: string): DuckDBValue {
  if (!timestampInRange(micros))
    throw new ColumnValueError(path, `timestamp of ${micros} microseconds since 1970 is out of range for a TIMESTAMPTZ column`);
  return timestampTZValue(micros);
}

function decimal(precision: number, scale: number): Mapped {
  // DuckDB's DECIMAL holds at most 38 digits; wider decimals keep every digit as text.
  if (precision > 38) return { sql: 'VARCHAR', convert: (v) => decimalText(twosComplement(v as Buffer), scale) };
  return {
    sql: `DECIMAL(${precision},${scale})`,
    convert: (v, p) => {
      const unscaled = twosComplement(v as Buffer);
      if ((unscaled < 0n ? -unscaled : unscaled) >= 10n ** BigInt(precision)) {
        throw new ColumnValueError(p, `decimal ${decimalText(unscaled, scale)} has more than the ${precision} digits of its type`);
      }
      return decimalValue(unscaled, precision, scale);
    },
  };
}

function twosComplement(bytes: Buffer): bigint {
  if (!bytes.length) return 0n;
  const n = BigInt(`0x${bytes.toString('hex')}`);
  return bytes[0]! & 0x80 ? n - (1n << BigInt(bytes.length * 8)) : n;
}

function decimalText(unscaled: bigint, scale: number): string {
  const digits = (unscaled < 0n ? -unscaled : unscaled).toString().padStart(scale + 1, '0');
  const text = scale ? `${digits.slice(0, -scale)}.${digits.slice(-scale)}` : digits;
  return unscaled < 0n ? `-${text}` : text;
}

const DAY_MICROS = 86_400_000_000n;

function timeOfDay(micros: bigint, path: string): DuckDBValue {
  if (micros < 0n || micros > DAY_MICROS) throw new ColumnValueError(path, `${micros} microseconds is not a time of day (0 to 24:00:00)`);
  return timeValue(micros);
}

function duration(bytes: Buffer, path: string): DuckDBValue {
  const months = bytes.readUInt32LE(0);
  const days = bytes.readUInt32LE(4);
  const millis = bytes.readUInt32LE(8);
  if (months > 0x7fffffff || days > 0x7fffffff)
    throw new ColumnValueError(path, `duration of ${months} months and ${days} days exceeds DuckDB's INTERVAL`);
  return intervalValue(months, days, BigInt(millis) * 1000n);
}

// ---- Protocol Buffers ----

const PROTO_SCALARS: Record<string, Mapped> = {
  double: DOUBLE,
  float: DOUBLE,
  int32: INTEGER,
  sint32: INTEGER,
  sfixed32: INTEGER,
  int64: BIGINT,
  sint64: BIGINT,
  sfixed64: BIGINT,
  uint32: UINTEGER,
  fixed32: UINTEGER,
  uint64: UBIGINT,
  fixed64: UBIGINT,
  bool: BOOLEAN,
  string: VARCHAR,
  bytes: BLOB,
};

function protoColumns(type: protobuf.Type): FieldColumn[] {
  return distinctNames('(top level)', messageFields(type, '', new Set()));
}

function messageFields(type: protobuf.Type, path: string, visiting: Set<protobuf.Type>): FieldColumn[] {
  if (visiting.has(type))
    throw new UnmappableSchemaError(path || '(top level)', `message ${type.name} contains itself; a column type cannot nest without end`);
  visiting.add(type);
  const columns = type.fieldsArray.map((f) => {
    const p = path ? `${path}.${f.name}` : f.name;
    const oneof = realOneof(f);
    if (oneof)
      throw new UnmappableSchemaError(
        p,
        `field ${f.name} belongs to oneof ${oneof.name}; BigQuery cannot map a oneof, and neither can Orderly`,
      );
    const value = protoValueMapped(f, p, visiting);
    let mapped = value;
    if (f.map) {
      const key = PROTO_SCALARS[mapKeyType(f)]!;
      mapped = {
        sql: `MAP(${key.sql}, ${value.sql})`,
        parts: { kind: 'map', key, value },
        convert: (v, q) =>
          mapValue(
            [...(v as Map<ProtoMapKey, ProtoValue>)].map(([k, x]) => ({
              key: key.convert(k, q),
              value: value.convert(x, `${q}[${JSON.stringify(String(k))}]`),
            })),
          ),
      };
    } else if (f.repeated) {
      mapped = list(value);
    }
    const presence = hasPresence(f);
    return { name: f.name, mapped, nullable: !f.required && presence, implicitPresence: !presence && !f.required && !f.repeated && !f.map };
  });
  visiting.delete(type);
  return columns;
}

function protoValueMapped(field: protobuf.Field, path: string, visiting: Set<protobuf.Type>): Mapped {
  const nested = messageTypeOf(field);
  if (nested) return struct(path, messageFields(nested, path, visiting));
  if (enumTypeOf(field)) return INTEGER;
  const scalar = PROTO_SCALARS[field.type];
  if (!scalar) throw new UnmappableSchemaError(path, `protobuf type ${field.type} has no column type`);
  return scalar;
}
