import type avro from 'avsc';
import protobuf from 'protobufjs';
import { underlying, type AvroType } from './avro-types.js';
import type { CompiledSchema } from './schema-definition.js';
import { hasPresence, mapKeyType, messageTypeOf, realOneof } from './proto-value.js';

/**
 * Pub/Sub's rules for a new schema revision (CommitSchema), checked against each existing revision:
 *
 * - AVRO: the new revision must follow Avro's schema-resolution rules "as though it is both the reader
 *   schema and the writer schema": data written with either must be readable with the other.
 * - PROTOCOL_BUFFER: optional fields may be added or removed; no other field may be added, removed or
 *   changed (its name, type, label, map key or oneof), in the top-level message or in any message it
 *   uses. "Optional" is a singular field with presence outside a oneof (proto2 `optional`, proto3
 *   `optional`, an editions field with explicit presence, a message field).
 *
 * Returns why the revisions are incompatible, or undefined when they are compatible.
 */
export function incompatibility(next: CompiledSchema, previous: CompiledSchema): string | undefined {
  if (next.type === 'AVRO' && previous.type === 'AVRO') {
    for (const [reader, writer, role] of [
      [next.avro, previous.avro, 'read data written with the earlier revision'],
      [previous.avro, next.avro, 'be read by the earlier revision'],
    ] as const) {
      const why = recordReadFromNonRecord(reader, writer, '', new Set());
      if (why) return `the new revision cannot ${role}: ${why}`;
      try {
        reader.createResolver(writer);
      } catch (e) {
        return `the new revision cannot ${role}: ${(e as Error).message}`;
      }
    }
    return undefined;
  }
  if (next.type === 'PROTOCOL_BUFFER' && previous.type === 'PROTOCOL_BUFFER')
    return protoIncompatibility(next.message, previous.message, new Set());
  return `a schema cannot change from ${previous.type} to ${next.type}`;
}

/**
 * The one resolution avsc cannot explain: a record read from a writer that is not a record throws a
 * TypeError ("Cannot read properties of undefined") instead of an error naming the types. Found along
 * the path avsc's resolution takes (record fields by name or alias, array items, map values, each
 * branch of a writer union); every other mismatch is left to avsc, whose messages name the types.
 * `path` names where, from the outer record (`Event.lines[].item`).
 */
function recordReadFromNonRecord(reader: AvroType, writer: AvroType, path: string, visited: Set<string>): string | undefined {
  const r = underlying(reader);
  const w = underlying(writer);
  if (w.typeName.startsWith('union')) {
    for (const branch of (w as avro.types.WrappedUnionType).types) {
      const why = recordReadFromNonRecord(r, branch, path, visited);
      if (why) return why;
    }
    return undefined;
  }
  if (r.typeName === 'array' && w.typeName === 'array')
    return recordReadFromNonRecord((r as avro.types.ArrayType).itemsType, (w as avro.types.ArrayType).itemsType, `${path}[]`, visited);
  if (r.typeName === 'map' && w.typeName === 'map')
    return recordReadFromNonRecord(
      (r as avro.types.MapType).valuesType as AvroType,
      (w as avro.types.MapType).valuesType as AvroType,
      `${path}{}`,
      visited,
    );
  if (!isRecord(r)) return undefined;
  if (!isRecord(w)) return `cannot read ${avroLabel(w)} as record ${r.name}${path ? ` (at ${path})` : ''}`;
  const pair = `${r.name}|${w.name}`;
  if (visited.has(pair)) return undefined;
  visited.add(pair);
  for (const field of (r as avro.types.RecordType).fields) {
    const names = [field.name, ...field.aliases];
    const source = (w as avro.types.RecordType).fields.find((f) => names.includes(f.name));
    const why = source && recordReadFromNonRecord(field.type, source.type, `${path || r.name!}.${field.name}`, visited);
    if (why) return why;
  }
  return undefined;
}

function isRecord(type: AvroType): boolean {
  return type.typeName === 'record' || type.typeName === 'error';
}

function avroLabel(type: AvroType): string {
  const kind = type.typeName === 'abstract:long' ? 'long' : type.typeName;
  return type.name ? `${kind} ${type.name}` : kind;
}

function protoIncompatibility(next: protobuf.Type, previous: protobuf.Type, visited: Set<string>): string | undefined {
  const pair = `${next.fullName}|${previous.fullName}`;
  if (visited.has(pair)) return undefined;
  visited.add(pair);
  const numbers = new Set([...Object.keys(next.fieldsById), ...Object.keys(previous.fieldsById)].map(Number));
  for (const number of [...numbers].sort((a, b) => a - b)) {
    const now = next.fieldsById[number];
    const before = previous.fieldsById[number];
    if (now && before) {
      if (signature(now) !== signature(before) || now.name !== before.name) {
        return `${now.name} of type ${signature(now)} is not compatible with ${before.name} of type ${signature(before)} (field ${number} of ${next.name})`;
      }
      const a = messageTypeOf(now);
      const b = messageTypeOf(before);
      const nested = a && b ? protoIncompatibility(a, b, visited) : undefined;
      if (nested) return nested;
    } else {
      const field = (now ?? before)!;
      if (!isOptional(field)) {
        return `${field.name} (field ${number} of ${next.name}) is ${now ? 'added' : 'removed'}, but only optional fields may be added or removed`;
      }
    }
  }
  return undefined;
}

function isOptional(field: protobuf.Field): boolean {
  return !field.required && hasPresence(field) && !realOneof(field);
}

/** A field's shape for comparison: label, type (named types by name), map key and oneof. */
function signature(field: protobuf.Field): string {
  const label = field.map
    ? `map<${mapKeyType(field)}, `
    : field.repeated
      ? 'repeated '
      : field.required
        ? 'required '
        : hasPresence(field)
          ? 'optional '
          : '';
  const type = field.resolvedType
    ? `${field.resolvedType instanceof protobuf.Enum ? 'enum' : 'message'} ${field.resolvedType.name}`
    : field.type;
  const oneof = realOneof(field);
  return `${label}${type}${field.map ? '>' : ''}${oneof ? ` in oneof ${oneof.name}` : ''}`;
}
