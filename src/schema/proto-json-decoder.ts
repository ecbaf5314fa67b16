import protobuf from 'protobufjs';
import { DECIMAL_TEXT, describeJson, isJsonObject, type JsonValue } from './json-text.js';
import { at, SchemaViolationError } from './schema-violation.js';
import {
  completeMessage,
  emptyMessage,
  enumTypeOf,
  jsonName,
  mapKeyType,
  MAX_PROTO_DEPTH,
  messageTypeOf,
  protoFeature,
  realOneof,
  type ProtoMapKey,
  type ProtoMessage,
  type ProtoValue,
} from './proto-value.js';

/**
 * Decodes a message in the proto3 JSON mapping (https://protobuf.dev/programming-guides/json/), as the
 * Java parser Pub/Sub runs (`JsonFormat.parser()`) reads it: a field by its JSON name (lowerCamelCase or
 * its `json_name`) or its proto name; an unknown field, the same field twice, or two members of one
 * oneof are refused; `null` leaves a field unset; 64-bit integers as numbers or decimal strings, other
 * integers also as strings ("1", "1.0", "1e2" when integral); floats as numbers, numeric strings,
 * "NaN", "Infinity", "-Infinity"; enums by name or number; bytes as (URL-safe) base64; map keys as
 * strings of their key type. A float is rounded to 32 bits, as Java stores it. Where Java would
 * silently change a value, this refuses it instead: a number or boolean for a string field, a float
 * beyond float range.
 */
export function decodeProtoJson(type: protobuf.Type, json: JsonValue): ProtoMessage {
  return completeMessage(type, message(type, json, '', 0), '');
}

const lookups = new WeakMap<protobuf.Type, Map<string, protobuf.Field>>();

function fieldsByJsonKey(type: protobuf.Type): Map<string, protobuf.Field> {
  let map = lookups.get(type);
  if (!map) {
    map = new Map();
    for (const f of type.fieldsArray) {
      map.set(jsonName(f), f);
      map.set(f.name, f);
    }
    lookups.set(type, map);
  }
  return map;
}

function message(type: protobuf.Type, json: JsonValue, path: string, depth: number): ProtoMessage {
  if (depth > MAX_PROTO_DEPTH) throw new SchemaViolationError(path, `nested deeper than ${MAX_PROTO_DEPTH} levels`);
  if (!isJsonObject(json))
    throw new SchemaViolationError(path, `expected a JSON object for message ${type.name}, got ${describeJson(json)}`);
  const target = emptyMessage();
  const seen = new Map<string, string>();
  const oneofs = new Map<string, string>();
  const fields = fieldsByJsonKey(type);
  for (const [key, value] of Object.entries(json)) {
    const field = fields.get(key);
    if (!field) throw new SchemaViolationError(at.field(path, key), `no such field in message ${type.name}`);
    const p = at.field(path, field.name);
    const earlier = seen.get(field.name);
    if (earlier !== undefined) throw new SchemaViolationError(p, `the field is given twice (as "${earlier}" and "${key}")`);
    seen.set(field.name, key);
    if (value === null) continue;
    const oneof = realOneof(field);
    if (oneof) {
      const other = oneofs.get(oneof.name);
      if (other)
        throw new SchemaViolationError(p, `${other} and ${field.name} belong to the same oneof ${oneof.name}; only one may be set`);
      oneofs.set(oneof.name, field.name);
    }
    target[field.name] = fieldValue(field, value, p, depth);
  }
  return target;
}

function fieldValue(field: protobuf.Field, json: JsonValue, path: string, depth: number): ProtoValue {
  if (field.map) {
    if (!isJsonObject(json)) throw new SchemaViolationError(path, `expected a JSON object for a map field, got ${describeJson(json)}`);
    const map = new Map<ProtoMapKey, ProtoValue>();
    for (const [k, v] of Object.entries(json)) {
      const p = at.key(path, k);
      if (v === null) throw new SchemaViolationError(p, 'a map value cannot be null');
      map.set(mapKey(mapKeyType(field), k, p), single(field, v, p, depth));
    }
    return map;
  }
  if (field.repeated) {
    if (!Array.isArray(json)) throw new SchemaViolationError(path, `expected a JSON array for a repeated field, got ${describeJson(json)}`);
    return json.map((v, i) => {
      if (v === null) throw new SchemaViolationError(at.index(path, i), 'a repeated field cannot hold null');
      return single(field, v, at.index(path, i), depth);
    });
  }
  return single(field, json, path, depth);
}

/** The value range of each protobuf integer type (proto3 JSON may write any of them as a string). */
export const PROTO_INT_RANGES: Readonly<Record<string, readonly [bigint, bigint]>> = {
  int32: [-(2n ** 31n), 2n ** 31n - 1n],
  sint32: [-(2n ** 31n), 2n ** 31n - 1n],
  sfixed32: [-(2n ** 31n), 2n ** 31n - 1n],
  uint32: [0n, 2n ** 32n - 1n],
  fixed32: [0n, 2n ** 32n - 1n],
  int64: [-(2n ** 63n), 2n ** 63n - 1n],
  sint64: [-(2n ** 63n), 2n ** 63n - 1n],
  sfixed64: [-(2n ** 63n), 2n ** 63n - 1n],
  uint64: [0n, 2n ** 64n - 1n],
  fixed64: [0n, 2n ** 64n - 1n],
};
const SPECIAL_FLOATS: Record<string, number> = { NaN: NaN, Infinity: Infinity, '-Infinity': -Infinity };

function single(field: protobuf.Field, json: JsonValue, path: string, depth: number): ProtoValue {
  const nested = messageTypeOf(field);
  if (nested) return message(nested, json, path, depth + 1);
  const enumType = enumTypeOf(field);
  if (enumType) return enumValue(enumType, json, path);
  const type = field.type;
  const fail = (expected: string): never => {
    throw new SchemaViolationError(path, `expected ${expected} for ${type} field ${field.name}, got ${describeJson(json)}`);
  };
  const range = PROTO_INT_RANGES[type];
  if (range) {
    const n = integer(json, path) ?? fail('an integer (a number or a decimal string)');
    if (n < range[0] || n > range[1]) throw new SchemaViolationError(path, `${n} is out of range for ${type} (${range[0]} to ${range[1]})`);
    return type.endsWith('64') ? n : Number(n);
  }
  switch (type) {
    case 'float':
    case 'double': {
      const n =
        typeof json === 'number'
          ? json
          : typeof json === 'bigint'
            ? Number(json)
            : typeof json === 'string' && json in SPECIAL_FLOATS
              ? SPECIAL_FLOATS[json]!
              : typeof json === 'string' && DECIMAL_TEXT.test(json)
                ? Number(json)
                : fail('a number, a numeric string, "NaN", "Infinity" or "-Infinity"');
      if (type === 'float') {
        // Java reads a float as a double and casts it, so 0.1 arrives as the 32-bit 0.10000000149011612
        // (what the wire format carries) and 1e-50 as 0. Java refuses a value beyond float range but lets
        // one within 1e-6 of it round to Infinity; that one is refused here too, so no finite value
        // silently becomes Infinity.
        const f = Math.fround(n);
        if (Number.isFinite(n) && !Number.isFinite(f))
          throw new SchemaViolationError(path, `${describeJson(json)} is out of range for a float`);
        return f;
      }
      if (typeof json === 'string' && !(json in SPECIAL_FLOATS) && !Number.isFinite(n)) {
        throw new SchemaViolationError(path, `${json} is out of range for a double`);
      }
      return n;
    }
    case 'bool':
      if (typeof json === 'boolean') return json;
      if (json === 'true' || json === 'false') return json === 'true';
      return fail('true or false');
    case 'string':
      return typeof json === 'string' ? json : fail('a JSON string');
    case 'bytes':
      return typeof json === 'string' ? base64(json, path) : fail('a base64 string');
    default:
      throw new Error(`Orderly cannot decode the protobuf type ${type}`);
  }
}

function enumValue(enumType: protobuf.Enum, json: JsonValue, path: string): number {
  if (typeof json === 'string') {
    const n = enumType.values[json];
    if (n === undefined)
      throw new SchemaViolationError(
        path,
        `"${json}" is not a value of enum ${enumType.name} (${Object.keys(enumType.values).join(', ')})`,
      );
    return n;
  }
  const n = integer(json, path);
  if (n === undefined || n < -(2n ** 31n) || n >= 2n ** 31n) {
    throw new SchemaViolationError(path, `expected a value name or an int32 number for enum ${enumType.name}, got ${describeJson(json)}`);
  }
  if (protoFeature(enumType, 'enum_type') === 'CLOSED' && !Object.values(enumType.values).includes(Number(n))) {
    throw new SchemaViolationError(path, `${n} is not a value of the closed enum ${enumType.name}`);
  }
  return Number(n);
}

function mapKey(keyType: string, key: string, path: string): ProtoMapKey {
  if (keyType === 'string') return key;
  if (keyType === 'bool') {
    if (key === 'true' || key === 'false') return key === 'true';
    throw new SchemaViolationError(path, `a bool map key must be "true" or "false", got "${key}"`);
  }
  const range = PROTO_INT_RANGES[keyType]!;
  const n = /^-?\d+$/.test(key) ? BigInt(key) : undefined;
  if (n === undefined || n < range[0] || n > range[1]) throw new SchemaViolationError(path, `"${key}" is not a ${keyType} map key`);
  return keyType.endsWith('64') ? n : Number(n);
}

/**
 * An integral value from a JSON number or a decimal string ("12", "1.0", "1e2"); undefined when `json`
 * is neither; a violation when it is one but not integral.
 */
function integer(json: JsonValue, path: string): bigint | undefined {
  if (typeof json === 'bigint') return json;
  if (typeof json === 'number') {
    if (Number.isSafeInteger(json)) return BigInt(json);
    if (Number.isInteger(json))
      throw new SchemaViolationError(
        path,
        `${json} is beyond 2^53 and written with a fraction or exponent; write it as a plain integer or a string`,
      );
    throw new SchemaViolationError(path, `expected an integer, got ${json}`);
  }
  if (typeof json !== 'string') return undefined;
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d{1,3}))?$/.exec(json);
  if (!m) return undefined;
  const [, sign, whole, fraction = '', exponent = '0'] = m;
  const digits = whole! + fraction;
  const shift = Number(exponent) - fraction.length;
  let n: bigint;
  if (shift >= 0) n = BigInt(digits) * 10n ** BigInt(shift);
  else if (/^0*$/.test(digits.slice(shift))) n = BigInt(digits.slice(0, shift) || '0');
  else throw new SchemaViolationError(path, `expected an integer, got "${json}"`);
  return sign ? -n : n;
}

function base64(text: string, path: string): Buffer {
  const body = text.replace(/=+$/, '');
  const alphabet = /^[A-Za-z0-9+/]*$/.test(body) || /^[A-Za-z0-9_-]*$/.test(body);
  const padding = text.length - body.length;
  if (!alphabet || body.length % 4 === 1 || padding > 2 || (padding > 0 && text.length % 4 !== 0)) {
    throw new SchemaViolationError(path, 'bytes must be base64 (the standard or the URL-safe alphabet)');
  }
  // Node's base64 decoder reads both alphabets.
  return Buffer.from(body, 'base64');
}
