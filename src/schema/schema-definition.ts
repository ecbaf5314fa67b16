import protobuf from 'protobufjs';
import { InvalidArgumentError } from '../core/errors.js';
import { avroType, type AvroType } from './avro-types.js';
import { JsonTextError, parseJsonText, type JsonValue } from './json-text.js';
import { checkProtoRules } from './proto-definition-rules.js';

/**
 * A Pub/Sub schema definition (`Schema.type` + `Schema.definition`), parsed and checked the way Pub/Sub
 * checks it on CreateSchema, CommitSchema and ValidateSchema:
 *
 * - AVRO: an Avro 1.11 schema in JSON (named types named, defaults valid for their type).
 * - PROTOCOL_BUFFER: a proto2, proto3 or editions `.proto` text with exactly one top-level type, which
 *   must be a message (nested messages and enums are fine) and no `import` (Pub/Sub stores one file and
 *   parses it on its own, so nothing could be imported), following protoc's rules (proto-definition-rules).
 * - At most 300 KB (Pub/Sub's limit for `definition`).
 *
 * Errors are INVALID_ARGUMENT naming `schema.definition` (or `schema.type`) with what is wrong and, where
 * the parser knows it, the line and column.
 */
export type SchemaType = 'AVRO' | 'PROTOCOL_BUFFER';

/** Pub/Sub's limit on `Schema.definition` ("300 KB"; counted in bytes of UTF-8, decimal kilobytes). */
export const MAX_DEFINITION_BYTES = 300_000;

export interface AvroSchema {
  type: 'AVRO';
  definition: string;
  avro: AvroType;
}

export interface ProtoSchema {
  type: 'PROTOCOL_BUFFER';
  definition: string;
  /** The one top-level message type. */
  message: protobuf.Type;
}

export type CompiledSchema = AvroSchema | ProtoSchema;

/**
 * Parses and checks a definition. `field` prefixes the error fields (`schema` for a request's `Schema`
 * message), so a bad definition is reported as `schema.definition`.
 */
export function compileSchema(type: unknown, definition: unknown, field = 'schema'): CompiledSchema {
  const schemaType = parseSchemaType(type, `${field}.type`);
  const where = `${field}.definition`;
  if (typeof definition !== 'string' || definition.trim() === '') throw new InvalidArgumentError(where, 'a schema definition is required');
  const bytes = Buffer.byteLength(definition);
  if (bytes > MAX_DEFINITION_BYTES) throw new InvalidArgumentError(where, `must be at most ${MAX_DEFINITION_BYTES} bytes, got ${bytes}`);
  const key = `${schemaType}\n${definition}`;
  const cached = cache.get(key);
  if (cached) {
    // Refresh its place: the cache forgets the least recently used definition first.
    cache.delete(key);
    cache.set(key, cached);
    return cached;
  }
  const compiled = schemaType === 'AVRO' ? compileAvro(definition, where) : compileProto(definition, where);
  cache.set(key, compiled);
  if (cache.size > CACHE_ENTRIES) cache.delete(cache.keys().next().value!);
  return compiled;
}

export function parseSchemaType(type: unknown, field: string): SchemaType {
  if (type === 'AVRO' || type === 2) return 'AVRO';
  if (type === 'PROTOCOL_BUFFER' || type === 1) return 'PROTOCOL_BUFFER';
  throw new InvalidArgumentError(field, `must be AVRO or PROTOCOL_BUFFER, got ${JSON.stringify(type) ?? String(type)}`);
}

/**
 * Compiled definitions by type and text: publish validates every message against a topic's revisions,
 * which must not re-parse a definition per message. Bounded, so many distinct definitions cannot grow it.
 */
const cache = new Map<string, CompiledSchema>();
const CACHE_ENTRIES = 256;

function compileAvro(definition: string, where: string): AvroSchema {
  let json: JsonValue;
  try {
    json = parseJsonText(definition);
  } catch (e) {
    if (e instanceof JsonTextError) throw new InvalidArgumentError(where, `not valid JSON (an Avro schema is JSON): ${e.message}`);
    throw e;
  }
  try {
    return { type: 'AVRO', definition, avro: avroType(json) };
  } catch (e) {
    throw new InvalidArgumentError(where, `not a valid Avro schema: ${(e as Error).message}`);
  }
}

function compileProto(definition: string, where: string): ProtoSchema {
  let parsed: protobuf.IParserResult;
  try {
    parsed = protobuf.parse(definition, { keepCase: true, alternateCommentMode: true });
  } catch (e) {
    throw new InvalidArgumentError(where, `not a valid Protocol Buffer definition: ${(e as Error).message}`);
  }
  const imports = [...(parsed.imports ?? []), ...(parsed.weakImports ?? [])];
  if (imports.length) {
    throw new InvalidArgumentError(
      where,
      `imports are not allowed in a Pub/Sub schema (found import "${imports[0]}"); define every type in the one definition`,
    );
  }
  try {
    parsed.root.resolveAll();
  } catch (e) {
    throw new InvalidArgumentError(where, `not a valid Protocol Buffer definition: ${(e as Error).message}`);
  }
  const scope = parsed.package ? parsed.root.lookup(parsed.package) : parsed.root;
  const top = scope instanceof protobuf.Namespace ? scope.nestedArray : [];
  const messages = top.filter((n): n is protobuf.Type => n instanceof protobuf.Type);
  if (top.length !== 1 || messages.length !== 1) {
    const names = top.map((n) => n.name).join(', ') || 'none';
    throw new InvalidArgumentError(
      where,
      `a Pub/Sub schema must define exactly one top-level type, a message; found ${top.length} (${names})`,
    );
  }
  checkProtoRules(messages[0]!, where);
  return { type: 'PROTOCOL_BUFFER', definition, message: messages[0]! };
}
