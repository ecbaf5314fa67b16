import avro from 'avsc';
import protobuf from 'protobufjs';
import { FailedPreconditionError } from '../core/errors.js';
import type { AvroRecord, AvroValue } from './avro-decoder.js';
import { avroType } from './avro-types.js';
import { isJsonObject, jsonText, parseJsonText } from './json-text.js';
import type { DecodedMessage } from './message-validation.js';
import { enumTypeOf, hasPresence, mapKeyType, messageTypeOf, type ProtoMapKey, type ProtoMessage, type ProtoValue } from './proto-value.js';
import type { CompiledSchema } from './schema-definition.js';

/**
 * The Avro layout of a Cloud Storage export with `avroConfig.useTopicSchema` ("the output file will be
 * serialized using the topic schema"):
 *
 * - An Avro topic schema is the file's schema as it is; each record is the message's decoded value.
 * - A Protocol Buffer topic schema is first turned into the Avro record it describes (below).
 * - With `writeMetadata`, the record gets the metadata fields after its own, as in Pub/Sub's metadata
 *   layout without a topic schema (`subscription_name`, `message_id`, `publish_time` as
 *   timestamp-micros, `attributes` holding the ordering key too) plus Orderly's `ordering_key` and
 *   `sequence`, as in Orderly's other Avro layout (connectors/object-storage/record-format.ts). Only
 *   the top-level record gets them (a recursive one is renamed, see withMetadataFields). A topic field
 *   with one of those names, or a topic schema that is not a record, cannot take them: refused
 *   (FAILED_PRECONDITION).
 *
 * Protocol Buffers to Avro: double/float -> double/float; int32, sint32, sfixed32 -> int; int64,
 * sint64, sfixed64, uint32, fixed32 -> long; uint64, fixed64 -> decimal(20, 0) on bytes (no Avro
 * integer holds 2^64 - 1); bool, string, bytes as such; an enum -> int (its number: a proto3 enum may
 * hold numbers it does not name); a message -> a record named as the message; repeated -> array; a map
 * with string keys -> map, other keys -> array of {key, value} records; a field with presence
 * (optional, message, oneof member) -> a union with null, default null.
 */
export interface AvroFileLayout {
  /** The file's Avro schema: `schemaText` read back (a long default beyond 2^53 as a bigint). */
  schema: avro.Schema;
  /** The file's Avro schema as its header holds it: JSON text, a long default beyond 2^53 written exactly. */
  schemaText: string;
  type: avro.Type;
  /** The value to append for one message (`metadata` exactly when the layout has metadata fields). */
  record(decoded: DecodedMessage, metadata?: MessageMetadata): unknown;
}

export interface MessageMetadata {
  subscriptionName: string;
  messageId: string;
  publishTimeMicros: bigint;
  /** The message's attributes; the layout adds the ordering key as Pub/Sub does. */
  attributes: Record<string, string>;
  orderingKey: string;
  sequence: bigint;
}

/** Pub/Sub's metadata fields of an Avro export record (avroConfig.writeMetadata), before its payload. */
export const PUBSUB_METADATA_FIELDS: avro.schema.RecordType['fields'] = [
  { name: 'subscription_name', type: 'string' },
  { name: 'message_id', type: 'string' },
  { name: 'publish_time', type: { type: 'long', logicalType: 'timestamp-micros' } },
  { name: 'attributes', type: { type: 'map', values: 'string' } },
];
/** The metadata fields Orderly adds after them: the message's ordering key and its sequence in the key. */
export const ORDERING_METADATA_FIELDS: avro.schema.RecordType['fields'] = [
  { name: 'ordering_key', type: 'string' },
  { name: 'sequence', type: 'long' },
];
const METADATA_FIELDS = [...PUBSUB_METADATA_FIELDS, ...ORDERING_METADATA_FIELDS];

export function avroFileLayout(schema: CompiledSchema, writeMetadata: boolean): AvroFileLayout {
  const base = schema.type === 'AVRO' ? { type: schema.avro, toRecord: (v: unknown) => v } : protoRecordLayout(schema.message);
  if (!writeMetadata)
    return {
      ...headerSchema(base.type, schema.type === 'AVRO' ? schema.definition : undefined),
      type: base.type,
      record: (decoded) => base.toRecord(decoded.value),
    };
  const top = base.type;
  if (!(top instanceof avro.types.RecordType)) {
    throw new FailedPreconditionError(
      'avroConfig.writeMetadata with useTopicSchema needs a topic schema that is a record, to add the metadata fields to it',
    );
  }
  const clash = top.fields.find((f) => METADATA_FIELDS.some((m) => m.name === f.name));
  if (clash)
    throw new FailedPreconditionError(
      `the topic schema's field ${clash.name} has the name of a metadata field that avroConfig.writeMetadata adds`,
    );
  const withMetadata = withMetadataFields(top);
  const type = avroType(withMetadata.schema);
  return {
    ...headerSchema(type, schema.type === 'AVRO' && !withMetadata.recursive ? definitionWithMetadata(schema.definition, top) : undefined),
    type,
    record(decoded, metadata) {
      if (!metadata) throw new Error('this Avro layout has metadata fields; pass the message metadata');
      const attributes = metadata.orderingKey ? { ...metadata.attributes, orderingKey: metadata.orderingKey } : { ...metadata.attributes };
      return {
        ...(base.toRecord(decoded.value) as AvroRecord),
        subscription_name: metadata.subscriptionName,
        message_id: metadata.messageId,
        publish_time: metadata.publishTimeMicros,
        attributes,
        ordering_key: metadata.orderingKey,
        sequence: metadata.sequence,
      };
    },
  };
}

/**
 * The topic's record with the metadata fields after its own. Its fields keep the topic schema's types
 * themselves, so a record nested anywhere in them is the topic's, without metadata. A recursive record
 * refers to itself by name: the top-level record, which differs from it, then takes another name
 * (`<name>WithMetadata`, as the metadata layout without a topic schema is PubsubMessageWithMetadata),
 * and its nested self stays the topic's record.
 *
 * Revisions of one schema can differ in that (an added `next: ["null", "Node"]` makes a record
 * recursive), and a file laid out by one revision takes the other's messages by Avro resolution, which
 * matches the top-level records by name or by the reader's aliases. So the top-level record carries the
 * other name as an alias: `<name>` when renamed, `<name>WithMetadata` when not.
 */
function withMetadataFields(top: avro.types.RecordType): { schema: avro.Schema; recursive: boolean } {
  const own = top.schema({ exportAttrs: true }) as { name: string; aliases?: string[]; fields: object[] };
  const named = namedTypes(top);
  const renamed = `${own.name}WithMetadata`;
  const recursive = named.nested.has(top);
  if (recursive && named.names.has(renamed))
    throw new FailedPreconditionError(
      `the topic schema's record ${own.name} contains itself, so the file's top-level record (with the metadata fields) needs another name, and ${renamed} is taken`,
    );
  // avsc takes a type where a schema is expected: the fields' types are the topic's own, not copies.
  const schema = {
    ...own,
    name: recursive ? renamed : own.name,
    aliases: [...(own.aliases ?? []), recursive ? own.name : renamed],
    fields: [...own.fields.map((f, i) => ({ ...f, type: top.fields[i]!.type })), ...METADATA_FIELDS],
  } as unknown as avro.Schema;
  return { schema, recursive };
}

/**
 * A non-recursive Avro topic record's definition as withMetadataFields lays it out: the metadata fields
 * after its own, and `<name>WithMetadata` among its aliases. Undefined for a definition whose top level
 * is not written as a record object (avsc's export is the header then).
 */
function definitionWithMetadata(definition: string, top: avro.types.RecordType): string | undefined {
  const record = parseJsonText(definition);
  if (!isJsonObject(record) || record.type !== 'record' || !Array.isArray(record.fields)) return undefined;
  const aliases = Array.isArray(record.aliases) ? record.aliases : [];
  return jsonText({ ...record, aliases: [...aliases, `${top.name!}WithMetadata`], fields: [...record.fields, ...METADATA_FIELDS] });
}

/** The named types (records, enums, fixed) reachable from a record's fields, and their full names. */
function namedTypes(record: avro.types.RecordType): { nested: Set<avro.Type>; names: Set<string> } {
  const nested = new Set<avro.Type>();
  const names = new Set<string>();
  const visit = (t: avro.Type): void => {
    if (t.name !== undefined) {
      if (nested.has(t)) return;
      nested.add(t);
      names.add(t.name);
    }
    if (t instanceof avro.types.RecordType) t.fields.forEach((f) => visit(f.type));
    else if (t instanceof avro.types.ArrayType) visit(t.itemsType);
    else if (t instanceof avro.types.MapType) visit(t.valuesType as avro.Type);
    else if (t instanceof avro.types.WrappedUnionType || t instanceof avro.types.UnwrappedUnionType) t.types.forEach(visit);
    else if (t instanceof avro.types.LogicalType) visit(t.underlyingType);
  };
  record.fields.forEach((f) => visit(f.type));
  return { nested, names };
}

/**
 * The schema of a file header for `type`. An Avro topic schema's header is its definition (`definition`,
 * with metadata as definitionWithMetadata makes it): "the output file will be serialized using the topic
 * schema", and avsc's export of its type drops what avsc does not model — an enum's default, a logical
 * type it does not know (`timestamp-nanos`), custom properties (`connect.name`) — which a reader of the
 * file then missed. Otherwise (a protobuf topic schema's record, a recursive record with metadata) it is
 * avsc's export. A `long` default beyond 2^53 is a bigint there (avro-types), which JSON.stringify (and
 * so avsc's own header) refuses: jsonText writes it as the exact integer, as Avro's Java reader takes it.
 */
function headerSchema(type: avro.Type, definition: string | undefined): { schema: avro.Schema; schemaText: string } {
  const schemaText = definition ?? jsonText(type.schema({ exportAttrs: true }));
  return { schema: parseJsonText(schemaText) as unknown as avro.Schema, schemaText };
}

/** The Avro type of a protobuf message and the conversion of its decoded values. */
function protoRecordLayout(message: protobuf.Type): { type: avro.Type; toRecord(value: unknown): AvroValue } {
  const defined = new Set<string>();
  const converters = new Map<protobuf.Type, (m: ProtoMessage) => AvroRecord>();
  const schema = recordSchema(message, defined, converters);
  const convert = converters.get(message)!;
  return { type: avroType(schema), toRecord: (value) => convert(value as ProtoMessage) };
}

interface Slot {
  schema: unknown;
  /** avsc's union branch name for this schema. */
  branch: string;
  convert(value: ProtoValue): AvroValue;
}

/**
 * A message's Avro record name: its full name, except that a message outside a package named like an Avro
 * primitive (`message long`), which Avro cannot name a record, takes a trailing `_`.
 */
function fullName(type: protobuf.ReflectionObject): string {
  const name = type.fullName.replace(/^\./, '');
  return AVRO_PRIMITIVES.has(name) ? `${name}_` : name;
}

const AVRO_PRIMITIVES = new Set(['null', 'boolean', 'int', 'long', 'float', 'double', 'bytes', 'string']);

function recordSchema(
  message: protobuf.Type,
  defined: Set<string>,
  converters: Map<protobuf.Type, (m: ProtoMessage) => AvroRecord>,
): avro.Schema {
  const name = fullName(message);
  defined.add(name);
  const fields: Array<{ name: string; slot: Slot; nullable: boolean }> = [];
  // Registered before the fields, so a message that contains itself converts through the same function.
  converters.set(message, (m) => {
    const out = Object.create(null) as AvroRecord;
    for (const f of fields) {
      const v = m[f.name];
      out[f.name] = v === undefined ? null : f.nullable ? wrap(f.slot.branch, f.slot.convert(v)) : f.slot.convert(v);
    }
    return out;
  });
  for (const field of message.fieldsArray) {
    const slot = field.map
      ? mapSlot(field, message, defined, converters)
      : field.repeated
        ? arraySlot(valueSlot(field, defined, converters))
        : valueSlot(field, defined, converters);
    fields.push({ name: field.name, slot, nullable: hasPresence(field) });
  }
  return {
    type: 'record',
    name,
    fields: fields.map((f) =>
      f.nullable ? { name: f.name, type: ['null', f.slot.schema], default: null } : { name: f.name, type: f.slot.schema },
    ),
  } as avro.Schema;
}

function valueSlot(field: protobuf.Field, defined: Set<string>, converters: Map<protobuf.Type, (m: ProtoMessage) => AvroRecord>): Slot {
  const nested = messageTypeOf(field);
  if (nested) {
    const name = fullName(nested);
    const schema = defined.has(name) ? name : recordSchema(nested, defined, converters);
    return { schema, branch: name, convert: (v) => converters.get(nested)!(v as ProtoMessage) };
  }
  if (enumTypeOf(field)) return { schema: 'int', branch: 'int', convert: (v) => v as number };
  return scalarSlot(field.type);
}

const SCALARS: Record<string, string> = {
  double: 'double',
  float: 'float',
  int32: 'int',
  sint32: 'int',
  sfixed32: 'int',
  int64: 'long',
  sint64: 'long',
  sfixed64: 'long',
  bool: 'boolean',
  string: 'string',
  bytes: 'bytes',
};

function scalarSlot(type: string): Slot {
  if (type === 'uint32' || type === 'fixed32') return { schema: 'long', branch: 'long', convert: (v) => BigInt(v as number) };
  if (type === 'uint64' || type === 'fixed64') {
    return {
      schema: { type: 'bytes', logicalType: 'decimal', precision: 20, scale: 0 },
      branch: 'bytes',
      convert: (v) => unsignedDecimalBytes(v as bigint),
    };
  }
  const avroName = SCALARS[type];
  if (!avroName) throw new Error(`Orderly cannot write the protobuf type ${type} to Avro`);
  return { schema: avroName, branch: avroName, convert: (v) => v as AvroValue };
}

function arraySlot(item: Slot): Slot {
  return {
    schema: { type: 'array', items: item.schema },
    branch: 'array',
    convert: (v) => (v as ProtoValue[]).map((x) => item.convert(x)),
  };
}

function mapSlot(
  field: protobuf.Field,
  owner: protobuf.Type,
  defined: Set<string>,
  converters: Map<protobuf.Type, (m: ProtoMessage) => AvroRecord>,
): Slot {
  const value = valueSlot(field, defined, converters);
  const keyType = mapKeyType(field);
  if (keyType === 'string') {
    return {
      schema: { type: 'map', values: value.schema },
      branch: 'map',
      convert: (v) => {
        const out = Object.create(null) as AvroRecord;
        for (const [k, x] of v as Map<ProtoMapKey, ProtoValue>) out[k as string] = value.convert(x);
        return out;
      },
    };
  }
  const key = scalarSlot(keyType);
  const entryName = `${fullName(owner)}.${field.name.replace(/(^|_)(.)/g, (_m, _u, c: string) => c.toUpperCase())}Entry`;
  defined.add(entryName);
  const entry = {
    type: 'record',
    name: entryName,
    fields: [
      { name: 'key', type: key.schema },
      { name: 'value', type: value.schema },
    ],
  };
  return {
    schema: { type: 'array', items: entry },
    branch: 'array',
    convert: (v) =>
      [...(v as Map<ProtoMapKey, ProtoValue>)].map(([k, x]) =>
        Object.assign(Object.create(null) as AvroRecord, { key: key.convert(k), value: value.convert(x) }),
      ),
  };
}

function wrap(branch: string, value: AvroValue): AvroValue {
  const wrapped = Object.create(null) as AvroRecord;
  wrapped[branch] = value;
  return wrapped;
}

/** An unsigned 64-bit integer as the big-endian two's-complement bytes of a decimal's unscaled value. */
function unsignedDecimalBytes(n: bigint): Buffer {
  const hex = n.toString(16);
  // A leading zero byte keeps values with the top bit set positive.
  const padded = hex.length % 2 ? `0${hex}` : hex;
  const bytes = Buffer.from(padded, 'hex');
  return bytes[0]! & 0x80 ? Buffer.concat([Buffer.from([0]), bytes]) : bytes;
}
