import protobuf from 'protobufjs';
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
