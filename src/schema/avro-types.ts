import avro from 'avsc';

/**
 * How Orderly builds avsc types for Pub/Sub's Avro schemas (Avro 1.11, as Pub/Sub documents):
 *
 * - `long` values are `bigint`s. avsc's default long is a JS number that refuses values beyond 2^53, so a
 *   valid message with a large `long` would be refused; a bigint holds every 64-bit value exactly.
 * - Logical types are recognised (so the type mapping can give a `timestamp-micros` a TIMESTAMP column)
 *   but values stay in their underlying representation (micros as a bigint, a decimal's two's-complement
 *   bytes), so decoding never loses or reinterprets anything. An invalid logical type (a `date` on a
 *   `string`, a `decimal` without precision) falls back to its underlying type, as the Avro
 *   specification and Java's parser (which Pub/Sub runs) do.
 * - Unions are always wrapped (`null` or `{branchName: value}`), so a value always says which branch it
 *   is, whatever the union.
 * - Record, enum and fixed types must be named, as the specification requires.
 */
export type AvroType = avro.Type;

/** A recognised logical type and its parameters. */
export interface AvroLogical {
  name:
    | 'decimal'
    | 'uuid'
    | 'date'
    | 'time-millis'
    | 'time-micros'
    | 'timestamp-millis'
    | 'timestamp-micros'
    | 'local-timestamp-millis'
    | 'local-timestamp-micros'
    | 'duration';
  precision?: number;
  scale?: number;
}

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

const BIGINT_LONG = avro.types.LongType.__with({
  fromBuffer: (buf: Buffer) => buf.readBigInt64LE(),
  toBuffer: (n: bigint) => {
    const buf = Buffer.alloc(8);
    buf.writeBigInt64LE(n);
    return buf;
  },
  // Defaults in a schema: a number, or a bigint when json-text read an integer past 2^53.
  fromJSON: (v: number | bigint) => BigInt(v),
  // avsc copies defaults through toJSON/fromJSON: a bigint past 2^53 must survive that unrounded.
  toJSON: (n: bigint) => (Number.isSafeInteger(Number(n)) ? Number(n) : n),
  isValid: (n: unknown) => typeof n === 'bigint' && n >= INT64_MIN && n <= INT64_MAX,
  compare: (a: bigint, b: bigint) => (a === b ? 0 : a < b ? -1 : 1),
});

const UNDERLYING: Record<AvroLogical['name'], string> = {
  decimal: 'bytes|fixed',
  uuid: 'string',
  date: 'int',
  'time-millis': 'int',
  'time-micros': 'long',
  'timestamp-millis': 'long',
  'timestamp-micros': 'long',
  'local-timestamp-millis': 'long',
  'local-timestamp-micros': 'long',
  duration: 'fixed',
};

type SchemaObject = Record<string, unknown>;

/** The logical type `schema` validly declares, if any (the Avro 1.11 rules for each). */
function declaredLogical(schema: unknown): AvroLogical | undefined {
  if (!schema || typeof schema !== 'object' || Array.isArray(schema)) return undefined;
  const s = schema as SchemaObject;
  const name = s.logicalType;
  if (typeof name !== 'string' || !Object.prototype.hasOwnProperty.call(UNDERLYING, name)) return undefined;
  const logical = name as AvroLogical['name'];
  if (typeof s.type !== 'string' || !UNDERLYING[logical].split('|').includes(s.type)) return undefined;
  if (logical === 'duration') return s.size === 12 ? { name: logical } : undefined;
  if (logical !== 'decimal') return { name: logical };
  const precision = s.precision;
  const scale = s.scale ?? 0;
  if (typeof precision !== 'number' || !Number.isInteger(precision) || precision < 1) return undefined;
  if (typeof scale !== 'number' || !Number.isInteger(scale) || scale < 0 || scale > precision) return undefined;
  if (s.type === 'fixed') {
    const size = s.size;
    if (typeof size !== 'number' || precision > Math.floor(Math.log10(2) * (8 * size - 1))) return undefined;
  }
  return { name: logical, precision, scale };
}

/** Schemas whose underlying type is being built right now (the logical type asks for it by the same object). */
const building = new WeakSet<object>();

class LogicalAvroType extends avro.types.LogicalType {
  readonly logical: AvroLogical;

  constructor(schema: avro.Schema, opts?: unknown) {
    const logical = declaredLogical(schema);
    // avsc then builds the underlying type instead, as the specification asks for invalid logical types.
    if (!logical) throw new Error('invalid logical type');
    building.add(schema as object);
    try {
      super(schema, opts);
    } finally {
      building.delete(schema as object);
    }
    this.logical = logical;
  }

  protected override _fromValue(value: unknown): unknown {
    return value;
  }

  protected override _toValue(value: unknown): unknown {
    return value;
  }

  /** Schema resolution ignores logical types (as Java's does): it is the underlying types that must match. */
  protected override _resolve(writer: avro.Type): unknown {
    this.underlyingType.createResolver(writer instanceof avro.types.LogicalType ? writer.underlyingType : writer);
    return (value: unknown) => value;
  }

  protected override _export(schema: avro.Schema): void {
    if (this.logical.precision !== undefined) Object.assign(schema, { precision: this.logical.precision, scale: this.logical.scale });
  }
}

/** The logical type of `type`, when it is one Orderly recognises. */
export function logicalOf(type: avro.Type): AvroLogical | undefined {
  return type instanceof LogicalAvroType ? type.logical : undefined;
}

/** The type under a logical type (or the type itself). */
export function underlying(type: avro.Type): avro.Type {
  return type instanceof avro.types.LogicalType ? type.underlyingType : type;
}

/** avsc's `logicalTypes` option for every logical type Avro defines: values pass through as the underlying type's. */
export const LOGICAL_TYPES = Object.fromEntries(Object.keys(UNDERLYING).map((name) => [name, LogicalAvroType]));

/** Builds the avsc type for a parsed Avro schema (throws avsc's error for an invalid one). */
export function avroType(schema: unknown): avro.Type {
  return avro.Type.forSchema(schema as avro.Schema, {
    wrapUnions: true,
    noAnonymousTypes: true,
    logicalTypes: LOGICAL_TYPES,
    registry: {},
    typeHook: (s) => {
      if (s === 'long') return BIGINT_LONG;
      if (!s || typeof s !== 'object' || Array.isArray(s) || (s as SchemaObject).type !== 'long') return undefined;
      // A `long` object schema is the bigint long unless it carries a valid logical type that is about to
      // be built (then the logical type's own request for its underlying type gets the bigint long).
      return building.has(s) || !declaredLogical(s) ? BIGINT_LONG : undefined;
    },
  });
}
