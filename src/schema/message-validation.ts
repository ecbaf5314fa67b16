import { FailedPreconditionError, InvalidArgumentError } from '../core/errors.js';
import { decodeAvroBinary, decodeAvroJson, type AvroValue } from './avro-decoder.js';
import { JsonTextError, parseJsonText, type JsonValue } from './json-text.js';
import { decodeProtoJson } from './proto-json-decoder.js';
import type { ProtoMessage } from './proto-value.js';
import { decodeProtoBinary } from './proto-wire-decoder.js';
import { compileSchema, type CompiledSchema, type SchemaType } from './schema-definition.js';
import { SchemaViolationError } from './schema-violation.js';

/**
 * Validates message data against a schema the way Pub/Sub does on publish and in ValidateMessage, and
 * returns the decoded value (the exports map it to columns or write it into Avro files):
 *
 * | type            | BINARY                              | JSON                                   |
 * |-----------------|-------------------------------------|----------------------------------------|
 * | AVRO            | Avro binary encoding of one value   | Avro JSON encoding (unions wrapped)    |
 * | PROTOCOL_BUFFER | protobuf wire format                | proto3 JSON mapping                    |
 *
 * A topic validates against a range of its schema's revisions, newest first; the first that accepts
 * the data is the revision Pub/Sub stamps on the message (`googclient_schemarevisionid`).
 */
export type Encoding = 'JSON' | 'BINARY';

export type DecodedMessage = { type: 'AVRO'; value: AvroValue } | { type: 'PROTOCOL_BUFFER'; value: ProtoMessage };

export function parseEncoding(value: unknown, field: string): Encoding {
  if (value === 'JSON' || value === 1) return 'JSON';
  if (value === 'BINARY' || value === 2) return 'BINARY';
  throw new InvalidArgumentError(field, `must be JSON or BINARY, got ${JSON.stringify(value) ?? String(value)}`);
}

/** Decodes `data`; throws SchemaViolationError (INVALID_ARGUMENT on `data`) if it does not conform. */
export function decodeMessage(schema: CompiledSchema, encoding: Encoding, data: Buffer): DecodedMessage {
  if (schema.type === 'AVRO') {
    return {
      type: 'AVRO',
      value: encoding === 'BINARY' ? decodeAvroBinary(schema.avro, data) : decodeAvroJson(schema.avro, parseMessageJson(data)),
    };
  }
  const value = encoding === 'BINARY' ? decodeProtoBinary(schema.message, data) : decodeProtoJson(schema.message, parseMessageJson(data));
  return { type: 'PROTOCOL_BUFFER', value };
}

/** JSON-encoded data: UTF-8 text holding one JSON value. */
function parseMessageJson(data: Buffer): JsonValue {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(data);
  } catch {
    throw new SchemaViolationError('', 'JSON-encoded data must be UTF-8 text');
  }
  try {
    return parseJsonText(text);
  } catch (e) {
    if (e instanceof JsonTextError) throw new SchemaViolationError('', `not valid JSON: ${e.message}`);
    throw e;
  }
}

/**
 * One revision of a schema, in creation order. A deleted revision keeps its place (without a
 * definition), so a topic's range that starts or ends at it still has a position.
 */
export interface RevisionDefinition {
  revisionId: string;
  definition?: string;
}

export interface RevisionRange {
  /** Oldest revision allowed (inclusive); empty or absent: from the first. */
  firstRevisionId?: string;
  /** Newest revision allowed (inclusive); empty or absent: up to the latest. */
  lastRevisionId?: string;
}

export interface MatchedRevision {
  revisionId: string;
  decoded: DecodedMessage;
}

/**
 * Validates `data` against every live revision in `range`, newest first, and returns the first that
 * accepts it. When none does, throws the newest revision's SchemaViolationError. A range naming a
 * revision that never existed, or holding no live revision, is the topic's misconfiguration:
 * FAILED_PRECONDITION.
 */
export function validateAgainstRevisions(
  type: SchemaType,
  revisions: readonly RevisionDefinition[],
  range: RevisionRange,
  encoding: Encoding,
  data: Buffer,
): MatchedRevision {
  const candidates = revisionsInRange(revisions, range);
  let first: SchemaViolationError | undefined;
  for (const revision of candidates) {
    try {
      return { revisionId: revision.revisionId, decoded: decodeMessage(compileSchema(type, revision.definition), encoding, data) };
    } catch (e) {
      if (!(e instanceof SchemaViolationError)) throw e;
      first ??= e;
    }
  }
  if (candidates.length === 1) throw first!;
  throw new SchemaViolationError(
    first!.path,
    `${first!.reason} (checked against revision ${candidates[0]!.revisionId}; none of the ${candidates.length} revisions in the topic's range accepts the data)`,
  );
}

/** The live revisions in `range`, newest first. */
function revisionsInRange(
  revisions: readonly RevisionDefinition[],
  range: RevisionRange,
): Array<RevisionDefinition & { definition: string }> {
  const position = (id: string | undefined, fallback: number, which: string) => {
    if (!id) return fallback;
    const i = revisions.findIndex((r) => r.revisionId === id);
    if (i < 0)
      throw new FailedPreconditionError(`the topic's schemaSettings.${which} names revision ${id}, which the schema does not have`);
    return i;
  };
  const from = position(range.firstRevisionId, 0, 'firstRevisionId');
  const to = position(range.lastRevisionId, revisions.length - 1, 'lastRevisionId');
  const live = revisions.slice(from, to + 1).filter((r): r is RevisionDefinition & { definition: string } => r.definition !== undefined);
  if (!live.length) {
    throw new FailedPreconditionError(
      `no revision of the topic's schema is left in its range ${range.firstRevisionId || '(first)'} to ${range.lastRevisionId || '(latest)'}; update the topic's schemaSettings`,
    );
  }
  return live.reverse();
}

/** The error a publish returns for message `index` whose data does not conform (INVALID_ARGUMENT). */
export function messageSchemaError(index: number, error: SchemaViolationError): SchemaViolationError {
  return error.on(`messages[${index}].data`);
}

/** The attributes Pub/Sub adds to a message validated against a schema. */
export function schemaAttributes(schemaName: string, revisionId: string, encoding: Encoding): Record<string, string> {
  return { googclient_schemaname: schemaName, googclient_schemarevisionid: revisionId, googclient_schemaencoding: encoding };
}
