import protobuf from 'protobufjs';
import { at, SchemaViolationError } from './schema-violation.js';

/**
 * The decoded form of a Protocol Buffer message, the same from the wire format and from proto3 JSON:
 * an object (without prototype) keyed by the field names of the definition; 32-bit integers, floats and
 * enums as numbers (an enum as its number, which is what identifies it across revisions), 64-bit integers
 * as bigint, `bytes` as Buffer, repeated fields as arrays, map fields as Map (keys typed as their key
 * type). A field without presence (a proto3 scalar) that is absent holds its default, as proto3 defines
 * it; a field with presence (a message, a proto2 or `optional` field, a oneof member) that is absent is
 * left out.
 */
export type ProtoMapKey = number | bigint | boolean | string;
export type ProtoValue = number | bigint | boolean | string | Buffer | ProtoMessage | ProtoValue[] | Map<ProtoMapKey, ProtoValue>;
export interface ProtoMessage {
  [field: string]: ProtoValue;
}

export function emptyMessage(): ProtoMessage {
  return Object.create(null) as ProtoMessage;
}

/** Java's default recursion limit for parsing, which Pub/Sub's validation inherits. */
export const MAX_PROTO_DEPTH = 100;

const INT64_TYPES = new Set(['int64', 'uint64', 'sint64', 'fixed64', 'sfixed64']);
const VARINT_TYPES = new Set(['int32', 'int64', 'uint32', 'uint64', 'sint32', 'sint64', 'bool']);
const FIXED64_TYPES = new Set(['fixed64', 'sfixed64', 'double']);
const FIXED32_TYPES = new Set(['fixed32', 'sfixed32', 'float']);

export const WIRE = { VARINT: 0, I64: 1, LEN: 2, SGROUP: 3, EGROUP: 4, I32: 5 } as const;

/** The wire type one value of a field's type is written with. */
export function wireTypeOf(field: protobuf.Field): number {
  if (field.resolvedType instanceof protobuf.Type) return field.delimited ? WIRE.SGROUP : WIRE.LEN;
  if (field.resolvedType instanceof protobuf.Enum || VARINT_TYPES.has(field.type)) return WIRE.VARINT;
  if (FIXED64_TYPES.has(field.type)) return WIRE.I64;
  if (FIXED32_TYPES.has(field.type)) return WIRE.I32;
  return WIRE.LEN;
}

/** Repeated fields of these types may arrive packed (one length-delimited run) or one value per tag. */
export function isPackable(field: protobuf.Field): boolean {
  const w = wireTypeOf(field);
  return w === WIRE.VARINT || w === WIRE.I64 || w === WIRE.I32;
}

export function messageTypeOf(field: protobuf.Field): protobuf.Type | undefined {
  return field.resolvedType instanceof protobuf.Type ? field.resolvedType : undefined;
}

export function enumTypeOf(field: protobuf.Field): protobuf.Enum | undefined {
  return field.resolvedType instanceof protobuf.Enum ? field.resolvedType : undefined;
}

/** The key type of a map field (protobufjs types map fields apart from other fields). */
export function mapKeyType(field: protobuf.Field): string {
  return (field as unknown as protobuf.MapField).keyType;
}

/**
 * Whether a singular field tells "unset" from its default: a message field always does; a scalar one
 * when proto2, `optional`, a oneof member or an editions field with explicit presence. (protobufjs's
 * `hasPresence` says false for a proto3 message field, which is wrong for our purposes.)
 */
export function hasPresence(field: protobuf.Field): boolean {
  return !field.repeated && !field.map && (Boolean(field.hasPresence) || messageTypeOf(field) !== undefined);
}

/** A field's proto3 JSON name: its `json_name`, else its default JSON name. */
export function jsonName(field: protobuf.Field): string {
  const custom: unknown = field.options?.json_name;
  return typeof custom === 'string' ? custom : defaultJsonName(field);
}

/** protoc's JSON name for a field without `json_name`: drop each `_`, upper-case the letter after it. */
export function defaultJsonName(field: protobuf.Field): string {
  return field.name.replace(/_+(.?)/g, (_m, c: string) => c.toUpperCase());
}

/**
 * An edition feature as protobufjs resolved it for a field or enum (proto2 and proto3 are editions with
 * fixed features: proto3 strings verify UTF-8, proto3 enums are open). protobufjs computes these but
 * exposes only some of them as getters (`hasPresence`, `packed`, `delimited`).
 */
export function protoFeature(
  obj: protobuf.ReflectionObject,
  name: 'enum_type' | 'utf8_validation' | 'json_format' | 'field_presence',
): string | undefined {
  return (obj as unknown as { _features?: Record<string, string | undefined> })._features?.[name];
}

/** A real oneof (not the synthetic one protobufjs makes for a proto3 `optional` field). */
export function realOneof(field: protobuf.Field): protobuf.OneOf | undefined {
  const oneof = field.partOf;
  return oneof && !field.options?.proto3_optional ? oneof : undefined;
}

/** proto3's default for a scalar or enum type. */
export function scalarDefault(type: string, enumType: protobuf.Enum | undefined): ProtoValue {
  if (enumType) return Object.values(enumType.values)[0] ?? 0;
  if (INT64_TYPES.has(type)) return 0n;
  if (type === 'bool') return false;
  if (type === 'string') return '';
  if (type === 'bytes') return Buffer.alloc(0);
  return 0;
}

/**
 * Gives absent fields their decoded form (defaults for fields without presence, empty repeated and map
 * fields) and checks proto2 `required` fields, through nested messages.
 */
export function completeMessage(type: protobuf.Type, message: ProtoMessage, path: string): ProtoMessage {
  for (const field of type.fieldsArray) {
    const p = at.field(path, field.name);
    const nested = messageTypeOf(field);
    const value = message[field.name];
    if (field.map) {
      const map = (value ?? new Map()) as Map<ProtoMapKey, ProtoValue>;
      if (nested) for (const [k, v] of map) completeMessage(nested, v as ProtoMessage, at.key(p, String(k)));
      message[field.name] = map;
    } else if (field.repeated) {
      const list = (value ?? []) as ProtoValue[];
      if (nested) list.forEach((v, i) => completeMessage(nested, v as ProtoMessage, at.index(p, i)));
      message[field.name] = list;
    } else if (value === undefined) {
      if (field.required) throw new SchemaViolationError(p, `required field of ${type.name} is missing`);
      if (!hasPresence(field)) message[field.name] = scalarDefault(field.type, enumTypeOf(field));
    } else if (nested) {
      completeMessage(nested, value as ProtoMessage, p);
    }
  }
  return message;
}
