import protobuf from 'protobufjs';

/** The wire type each scalar is encoded with (proto3): 0 varint, 1 64-bit, 2 length-delimited, 5 32-bit. */
const SCALAR_WIRE_TYPE: Readonly<Record<string, number>> = {
  double: 1,
  float: 5,
  int32: 0,
  uint32: 0,
  sint32: 0,
  fixed32: 5,
  sfixed32: 5,
  int64: 0,
  uint64: 0,
  sint64: 0,
  fixed64: 1,
  sfixed64: 1,
  bool: 0,
  string: 2,
  bytes: 2,
};
const WIRE_TYPE_NAME = ['varint', '64-bit', 'length-delimited', 'group start', 'group end', '32-bit'];

function wireTypeOf(field: protobuf.Field): number {
  if (field.map || field.resolvedType instanceof protobuf.Type) return 2;
  if (field.resolvedType instanceof protobuf.Enum) return 0;
  return SCALAR_WIRE_TYPE[field.type] ?? 2;
}

const entryTypes = new WeakMap<protobuf.MapField, protobuf.Type>();

/** A map field's entry as the message it is on the wire: key (1) and value (2). */
function entryTypeOf(field: protobuf.MapField): protobuf.Type {
  let entry = entryTypes.get(field);
  if (!entry) {
    entry = new protobuf.Type(`${field.name}Entry`)
      .add(new protobuf.Field('key', 1, field.keyType))
      .add(new protobuf.Field('value', 2, field.type));
    if (field.resolvedType) entry.fieldsById[2]!.resolvedType = field.resolvedType;
    entryTypes.set(field, entry);
  }
  return entry;
}

/**
 * Throws if a known field of `type` (or of a message nested in it) comes with another wire type than its
 * declared type's. protobufjs's decoders read a field by its declared type whatever the wire says (bytes
 * `2a 0a` for StreamingPullRequest's int32 field 5 read as a 10-second stream ack deadline). Google's own
 * parsers keep such a field as an unknown one, so the request goes on without it; refused here instead, as
 * an accepted field is honoured or refused, never dropped. Unknown fields are skipped, as proto3 asks.
 */
export function checkWireTypes(type: protobuf.Type, bytes: Uint8Array): void {
  check(type, protobuf.Reader.create(bytes), bytes.length);
}

function check(type: protobuf.Type, reader: protobuf.Reader, end: number): void {
  while (reader.pos < end) {
    const tag = reader.uint32();
    const wire = tag & 7;
    const field = type.fieldsById[tag >>> 3];
    if (!field) {
      reader.skipType(wire);
      continue;
    }
    const expected = wireTypeOf(field);
    // A repeated number may also come packed: all its values in one length-delimited run.
    const packed = field.repeated && expected !== 2 && wire === 2;
    if (wire !== expected && !packed)
      throw new Error(
        `${type.fullName.slice(1)}.${field.name} (field ${field.id}) came as ${WIRE_TYPE_NAME[wire] ?? `wire type ${wire}`}, not as its ${field.type}'s ${WIRE_TYPE_NAME[expected]}`,
      );
    const nested =
      field instanceof protobuf.MapField
        ? entryTypeOf(field)
        : field.resolvedType instanceof protobuf.Type
          ? field.resolvedType
          : undefined;
    if (!nested) {
      reader.skipType(wire);
      continue;
    }
    const length = reader.uint32();
    const nestedEnd = reader.pos + length;
    if (nestedEnd > end) throw new RangeError(`${type.fullName.slice(1)}.${field.name} runs past the end of the message`);
    check(nested, reader, nestedEnd);
  }
  if (reader.pos !== end) throw new RangeError(`${type.fullName.slice(1)}: a field runs past the end of the message`);
}
