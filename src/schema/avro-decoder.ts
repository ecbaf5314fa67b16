import avro from 'avsc';
import { underlying, type AvroType } from './avro-types.js';
import { describeJson, isJsonObject, type JsonValue } from './json-text.js';
import { at, SchemaViolationError } from './schema-violation.js';

/**
 * Decodes message data against an Avro schema in Pub/Sub's two encodings, strictly, naming the path of
 * the first value that does not fit:
 *
 * - BINARY: Avro's binary encoding of exactly one value (nothing left over, nothing cut short).
 * - JSON: Avro's JSON encoding, read as Java's `JsonDecoder` (Avro 1.11, which Pub/Sub runs) reads it:
 *   a union value other than null is wrapped in an object naming its branch (`{"string": "x"}`), `bytes`
 *   and `fixed` are strings of code points U+0000..U+00FF, and every record field must be present, also
 *   one with a default, and a `float` is rounded to 32 bits. Unlike Java's decoder, an unknown field is
 *   always refused (Java refuses it only when it comes before an expected field), a fractional number
 *   for an `int` is refused (Java truncates it) and so is a float beyond float range (Java makes it
 *   Infinity), so nothing is silently changed.
 *
 * Values: null, boolean, int/float/double as number, long as bigint, bytes/fixed as Buffer, string, enum
 * symbol, array, map and record as objects without prototype, a union as null or `{branchName: value}`,
 * a logical type as its underlying value — the representation avsc's `toBuffer` takes (see avro-types).
 */
export type AvroValue = null | boolean | number | bigint | string | Buffer | AvroValue[] | AvroRecord;
export interface AvroRecord {
  [key: string]: AvroValue;
}

/** Deeper nesting is refused (a recursive schema could otherwise exhaust the stack). */
const MAX_DEPTH = 512;
/** Array items that take no bytes (`null`, an empty record) cannot be bounded by the data's size. */
const MAX_EMPTY_ITEMS = 1_000_000;

export function decodeAvroBinary(type: AvroType, data: Buffer): AvroValue {
  const reader = new BinaryReader(data);
  const value = reader.read(type, '', 0);
  if (reader.pos !== data.length) {
    const left = data.length - reader.pos;
    throw new SchemaViolationError(
      '',
      `${left} byte${left === 1 ? '' : 's'} left over after the Avro value (the data must be exactly one binary-encoded value)`,
    );
  }
  return value;
}

/** `json` is the message data read as JSON (see message-validation). */
export function decodeAvroJson(type: AvroType, json: JsonValue): AvroValue {
  return fromJson(type, json, '', 0);
}

function record(): AvroRecord {
  return Object.create(null) as AvroRecord;
}

/** The type's name for decoding: a logical type decodes as its underlying type. */
function kind(type: AvroType): string {
  return underlying(type).typeName;
}

function typeLabel(type: AvroType): string {
  const b = underlying(type);
  return b.name ?? (kind(b) === 'abstract:long' ? 'long' : kind(b).replace('union:wrapped', 'union'));
}

class BinaryReader {
  pos = 0;
  private emptyItems = 0;

  constructor(private readonly buf: Buffer) {}

  read(type: AvroType, path: string, depth: number): AvroValue {
    if (depth > MAX_DEPTH) throw new SchemaViolationError(path, `nested deeper than ${MAX_DEPTH} levels`);
    const t = underlying(type);
    switch (kind(t)) {
      case 'null':
        return null;
      case 'boolean': {
        const b = this.bytes(1, path)[0]!;
        if (b > 1) throw new SchemaViolationError(path, `a boolean must be the byte 0 or 1, got ${b}`);
        return b === 1;
      }
      case 'int':
        return this.int(path);
      case 'abstract:long':
        return this.long(path);
      case 'float':
        return this.bytes(4, path).readFloatLE(0);
      case 'double':
        return this.bytes(8, path).readDoubleLE(0);
      case 'bytes':
        return Buffer.from(this.bytes(this.length(path), path));
      case 'string':
        // Invalid UTF-8 becomes U+FFFD, as Java's decoder (which Pub/Sub runs) reads it.
        return this.bytes(this.length(path), path).toString('utf8');
      case 'fixed':
        return Buffer.from(this.bytes((t as avro.types.FixedType).size, path));
      case 'enum': {
        const symbols = (t as avro.types.EnumType).symbols;
        const index = this.int(path);
        const symbol = symbols[index];
        if (symbol === undefined)
          throw new SchemaViolationError(path, `enum ${t.name} has no symbol at index ${index} (it has ${symbols.length})`);
        return symbol;
      }
      case 'array': {
        const items: AvroValue[] = [];
        const itemType = (t as avro.types.ArrayType).itemsType;
        this.blocks(path, minSize(itemType), () => items.push(this.read(itemType, at.index(path, items.length), depth + 1)));
        return items;
      }
      case 'map': {
        const map = record();
        const valuesType = (t as avro.types.MapType).valuesType as AvroType;
        this.blocks(path, 2, () => {
          const key = this.bytes(this.length(path), path).toString('utf8');
          map[key] = this.read(valuesType, at.key(path, key), depth + 1);
        });
        return map;
      }
      case 'record':
      case 'error': {
        const result = record();
        for (const f of (t as avro.types.RecordType).fields) result[f.name] = this.read(f.type, at.field(path, f.name), depth + 1);
        return result;
      }
      case 'union:wrapped': {
        const types = (t as avro.types.WrappedUnionType).types;
        const index = this.long(path);
        const branch = types[Number(index)];
        if (branch === undefined || index < 0n)
          throw new SchemaViolationError(path, `union branch index ${index} out of range (the union has ${types.length} branches)`);
        if (kind(branch) === 'null') return null;
        const wrapped = record();
        wrapped[branch.branchName!] = this.read(branch, path, depth + 1);
        return wrapped;
      }
      default:
        throw new Error(`Orderly cannot decode the Avro type ${t.typeName}`);
    }
  }

  private blocks(path: string, itemMinSize: number, readItem: () => void): void {
    for (;;) {
      let count = this.long(path);
      if (count === 0n) return;
      if (count < 0n) {
        count = -count;
        this.long(path); // the block's size in bytes, only useful for skipping
      }
      const remaining = this.buf.length - this.pos;
      if (itemMinSize > 0 && count * BigInt(itemMinSize) > BigInt(remaining)) {
        throw new SchemaViolationError(path, `a block claims ${count} items but only ${remaining} bytes remain`);
      }
      if (itemMinSize === 0) {
        this.emptyItems += Number(count);
        if (this.emptyItems > MAX_EMPTY_ITEMS) throw new SchemaViolationError(path, `more than ${MAX_EMPTY_ITEMS} empty array items`);
      }
      for (let i = 0n; i < count; i++) readItem();
    }
  }

  private varint(path: string): bigint {
    let result = 0n;
    for (let shift = 0n; shift < 70n; shift += 7n) {
      if (this.pos >= this.buf.length) throw new SchemaViolationError(path, 'data ends inside a number');
      const b = this.buf[this.pos++]!;
      result |= BigInt(b & 0x7f) << shift;
      if (b < 0x80) return result;
    }
    throw new SchemaViolationError(path, 'a variable-length number longer than 10 bytes');
  }

  private long(path: string): bigint {
    const n = this.varint(path);
    if (n >= 2n ** 64n) throw new SchemaViolationError(path, 'a long beyond 64 bits');
    return (n >> 1n) ^ -(n & 1n);
  }

  private int(path: string): number {
    const n = this.long(path);
    if (n < -(2n ** 31n) || n >= 2n ** 31n) throw new SchemaViolationError(path, `${n} does not fit an int (32 bits)`);
    return Number(n);
  }

  private length(path: string): number {
    const n = this.long(path);
    if (n < 0n) throw new SchemaViolationError(path, `negative length ${n}`);
    if (n > BigInt(this.buf.length - this.pos)) throw new SchemaViolationError(path, `length ${n} runs past the end of the data`);
    return Number(n);
  }

  private bytes(n: number, path: string): Buffer {
    if (this.pos + n > this.buf.length) throw new SchemaViolationError(path, 'data ends inside a value');
    const slice = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return slice;
  }
}

/** The fewest bytes one value of `type` takes in the binary encoding. */
function minSize(type: AvroType, visiting = new Set<AvroType>()): number {
  const t = underlying(type);
  switch (kind(t)) {
    case 'null':
      return 0;
    case 'float':
      return 4;
    case 'double':
      return 8;
    case 'fixed':
      return (t as avro.types.FixedType).size;
    case 'record':
    case 'error': {
      if (visiting.has(t)) return 0;
      visiting.add(t);
      const size = (t as avro.types.RecordType).fields.reduce((sum, f) => sum + minSize(f.type, visiting), 0);
      visiting.delete(t);
      return size;
    }
    default:
      return 1;
  }
}

const INT32 = [-(2n ** 31n), 2n ** 31n - 1n] as const;
const INT64 = [-(2n ** 63n), 2n ** 63n - 1n] as const;
const SPECIAL_FLOATS: Record<string, number> = { NaN: NaN, Infinity: Infinity, '-Infinity': -Infinity };

function fromJson(type: AvroType, json: JsonValue, path: string, depth: number): AvroValue {
  if (depth > MAX_DEPTH) throw new SchemaViolationError(path, `nested deeper than ${MAX_DEPTH} levels`);
  const t = underlying(type);
  const fail = (expected: string): never => {
    throw new SchemaViolationError(path, `expected ${expected} for Avro ${typeLabel(t)}, got ${describeJson(json)}`);
  };
  switch (kind(t)) {
    case 'null':
      return json === null ? null : fail('null');
    case 'boolean':
      return typeof json === 'boolean' ? json : fail('true or false');
    case 'int':
      return Number(integer(json, INT32, path) ?? fail('an integer'));
    case 'abstract:long':
      return integer(json, INT64, path) ?? fail('an integer');
    case 'float':
    case 'double': {
      const n =
        typeof json === 'number'
          ? json
          : typeof json === 'string' && json in SPECIAL_FLOATS
            ? SPECIAL_FLOATS[json]!
            : typeof json === 'bigint'
              ? Number(json)
              : fail('a number');
      if (kind(t) === 'double') return n;
      // Java's decoder reads a float into 32 bits, so 0.1 arrives as 0.10000000149011612 (what the binary
      // encoding carries) and 1e-50 as 0. Beyond float range Java gives Infinity; refused here instead.
      const f = Math.fround(n);
      if (Number.isFinite(n) && !Number.isFinite(f)) throw new SchemaViolationError(path, `${n} is out of range for a float`);
      return f;
    }
    case 'string':
      return typeof json === 'string' ? json : fail('a string');
    case 'bytes':
      return typeof json === 'string' ? latin1(json, path) : fail('a string of byte code points (\\u0000 to \\u00ff)');
    case 'fixed': {
      if (typeof json !== 'string') return fail('a string of byte code points (\\u0000 to \\u00ff)');
      const bytes = latin1(json, path);
      const size = (t as avro.types.FixedType).size;
      if (bytes.length !== size) throw new SchemaViolationError(path, `fixed ${t.name} takes exactly ${size} bytes, got ${bytes.length}`);
      return bytes;
    }
    case 'enum': {
      const symbols = (t as avro.types.EnumType).symbols;
      if (typeof json === 'string' && symbols.includes(json)) return json;
      return fail(`one of the symbols ${symbols.join(', ')}`);
    }
    case 'array': {
      if (!Array.isArray(json)) return fail('an array');
      const itemType = (t as avro.types.ArrayType).itemsType;
      return json.map((item, i) => fromJson(itemType, item, at.index(path, i), depth + 1));
    }
    case 'map': {
      if (!isJsonObject(json)) return fail('an object');
      const map = record();
      const valuesType = (t as avro.types.MapType).valuesType as AvroType;
      for (const [k, v] of Object.entries(json)) map[k] = fromJson(valuesType, v, at.key(path, k), depth + 1);
      return map;
    }
    case 'record':
    case 'error': {
      if (!isJsonObject(json)) return fail('an object');
      const result = record();
      const used = new Set<string>();
      for (const f of (t as avro.types.RecordType).fields) {
        const key = [f.name, ...f.aliases].find((k) => Object.prototype.hasOwnProperty.call(json, k));
        if (key === undefined) {
          throw new SchemaViolationError(
            at.field(path, f.name),
            "missing; Avro's JSON encoding needs every field of a record, also one with a default",
          );
        }
        used.add(key);
        result[f.name] = fromJson(f.type, json[key]!, at.field(path, f.name), depth + 1);
      }
      const unknown = Object.keys(json).filter((k) => !used.has(k));
      if (unknown.length) throw new SchemaViolationError(at.field(path, unknown[0]!), `no such field in record ${t.name}`);
      return result;
    }
    case 'union:wrapped': {
      const types = (t as avro.types.WrappedUnionType).types;
      const names = types.map((b) => b.branchName!);
      if (json === null) {
        if (types.some((b) => kind(b) === 'null')) return null;
        return fail(`one of the branches ${names.join(', ')}`);
      }
      const keys = isJsonObject(json) ? Object.keys(json) : [];
      const branch = keys.length === 1 ? types.find((b) => b.branchName === keys[0] && kind(b) !== 'null') : undefined;
      if (!branch) {
        // The common mistake: the bare value of the right branch. Say how to write it.
        const fits = types.find((b) => kind(b) !== 'null' && accepts(b, json, depth));
        const hint = fits ? `write {"${fits.branchName}": ${describeJson(json)}}` : `branches: ${names.join(', ')}`;
        throw new SchemaViolationError(
          path,
          `Avro's JSON encoding writes a union value as null or as an object naming its branch (${hint}); got ${describeJson(json)}`,
        );
      }
      const wrapped = record();
      wrapped[branch.branchName!] = fromJson(branch, (json as Record<string, JsonValue>)[keys[0]!]!, path, depth + 1);
      return wrapped;
    }
    default:
      throw new Error(`Orderly cannot decode the Avro type ${t.typeName}`);
  }
}

function accepts(type: AvroType, json: JsonValue, depth: number): boolean {
  try {
    fromJson(type, json, '', depth + 1);
    return true;
  } catch {
    return false;
  }
}

/** An integral JSON number (1.0 and 1e3 count, 1.5 does not) within `range`, or undefined if not a number. */
function integer(json: JsonValue, range: readonly [bigint, bigint], path: string): bigint | undefined {
  let n: bigint;
  if (typeof json === 'bigint') n = json;
  else if (typeof json === 'number' && Number.isSafeInteger(json)) n = BigInt(json);
  else if (typeof json === 'number' && Number.isInteger(json)) {
    // 1.0e19 was read as a double, which cannot say which integer near it was meant.
    throw new SchemaViolationError(path, `${json} is beyond 2^53 and written with a fraction or exponent; write it as a plain integer`);
  } else if (typeof json === 'number') throw new SchemaViolationError(path, `expected an integer, got ${json}`);
  else return undefined;
  if (n < range[0] || n > range[1]) throw new SchemaViolationError(path, `${n} is out of range (${range[0]} to ${range[1]})`);
  return n;
}

function latin1(text: string, path: string): Buffer {
  for (let i = 0; i < text.length; i++) {
    if (text.charCodeAt(i) > 0xff) {
      throw new SchemaViolationError(
        path,
        `bytes are written as characters \\u0000 to \\u00ff, one per byte; character ${i} is U+${text.charCodeAt(i).toString(16).toUpperCase().padStart(4, '0')}`,
      );
    }
  }
  return Buffer.from(text, 'latin1');
}
