import protobuf from 'protobufjs';
import { at, SchemaViolationError } from './schema-violation.js';
import {
  completeMessage,
  emptyMessage,
  enumTypeOf,
  isPackable,
  mapKeyType,
  MAX_PROTO_DEPTH,
  messageTypeOf,
  protoFeature,
  realOneof,
  scalarDefault,
  WIRE,
  wireTypeOf,
  type ProtoMapKey,
  type ProtoMessage,
  type ProtoValue,
} from './proto-value.js';

/**
 * Decodes the Protocol Buffer wire format against a message type, as strictly as Pub/Sub validates
 * BINARY messages: a field number the type does not declare is refused (Pub/Sub refuses it, where an
 * ordinary parser would keep it as an unknown field), as is a value written with the wrong wire type, a
 * proto3 string that is not UTF-8, a closed (proto2) enum value the enum does not have, a missing
 * `required` field, and data that is cut short or runs on. Repeated scalars may be packed or not (both
 * are valid encodings of the same value); a singular field seen twice keeps its last value, and a message
 * field seen twice is merged, as the format defines.
 */
export function decodeProtoBinary(type: protobuf.Type, data: Buffer): ProtoMessage {
  const reader = new WireReader(data);
  const message = emptyMessage();
  reader.message(type, message, '', 0, data.length, undefined);
  return completeMessage(type, message, '');
}

const WIRE_NAMES = ['VARINT', 'I64', 'LEN', 'SGROUP', 'EGROUP', 'I32', '6', '7'];
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

class WireReader {
  pos = 0;

  constructor(private readonly buf: Buffer) {}

  message(type: protobuf.Type, target: ProtoMessage, path: string, depth: number, end: number, group: number | undefined): void {
    if (depth > MAX_PROTO_DEPTH) throw new SchemaViolationError(path, `nested deeper than ${MAX_PROTO_DEPTH} levels`);
    while (this.pos < end) {
      const tag = this.varint(path, end);
      const number = Number(tag >> 3n);
      const wire = Number(tag & 7n);
      if (wire === WIRE.EGROUP) {
        if (number !== group) throw new SchemaViolationError(path, `end of group ${number} where none is open`);
        return;
      }
      if (number < 1 || number > 536_870_911) throw new SchemaViolationError(path, `invalid field number ${number}`);
      const field = type.fieldsById[number];
      if (!field)
        throw new SchemaViolationError(
          path,
          `field number ${number} is not declared in message ${type.name} (wire type ${WIRE_NAMES[wire]})`,
        );
      this.field(field, wire, target, at.field(path, field.name), depth, end);
    }
    if (group !== undefined) throw new SchemaViolationError(path, `group ${group} is not closed`);
    if (this.pos !== end) throw new SchemaViolationError(path, 'a value runs past the end of its message');
  }

  private field(field: protobuf.Field, wire: number, target: ProtoMessage, path: string, depth: number, end: number): void {
    if (field.map) {
      this.expectWire(field, wire, WIRE.LEN, path);
      const entryEnd = this.lengthEnd(path, end);
      const [key, value] = this.mapEntry(field, path, depth, entryEnd);
      ((target[field.name] ??= new Map()) as Map<ProtoMapKey, ProtoValue>).set(key, value);
      return;
    }
    const expected = wireTypeOf(field);
    if (field.repeated) {
      const list = (target[field.name] ??= []) as ProtoValue[];
      if (wire === WIRE.LEN && isPackable(field)) {
        const runEnd = this.lengthEnd(path, end);
        while (this.pos < runEnd) list.push(this.value(field, expected, at.index(path, list.length), depth, runEnd, undefined));
        return;
      }
      this.expectWire(field, wire, expected, path);
      list.push(this.value(field, expected, at.index(path, list.length), depth, end, undefined));
      return;
    }
    this.expectWire(field, wire, expected, path);
    const oneof = realOneof(field);
    if (oneof) for (const member of oneof.oneof) if (member !== field.name) delete target[member];
    const existing = target[field.name];
    target[field.name] = this.value(
      field,
      expected,
      path,
      depth,
      end,
      messageTypeOf(field) ? (existing as ProtoMessage | undefined) : undefined,
    );
  }

  private mapEntry(field: protobuf.Field, path: string, depth: number, end: number): [ProtoMapKey, ProtoValue] {
    let key: ProtoMapKey | undefined;
    let value: ProtoValue | undefined;
    const nested = messageTypeOf(field);
    while (this.pos < end) {
      const tag = this.varint(path, end);
      const number = Number(tag >> 3n);
      const wire = Number(tag & 7n);
      if (number === 1) {
        const keyType = mapKeyType(field);
        const expected = keyWireType(keyType);
        if (wire !== expected)
          throw new SchemaViolationError(
            path,
            `map key of ${field.name} (${keyType}) is written with wire type ${WIRE_NAMES[expected]}, got ${WIRE_NAMES[wire]}`,
          );
        key = this.scalar(keyType, undefined, field, path, end) as ProtoMapKey;
      } else if (number === 2) {
        const expected = wireTypeOf(field);
        this.expectWire(field, wire, expected, path);
        value = this.value(
          field,
          expected,
          key === undefined ? path : at.key(path, String(key)),
          depth,
          end,
          nested ? (value as ProtoMessage | undefined) : undefined,
        );
      } else {
        throw new SchemaViolationError(path, `a map entry has only fields 1 (key) and 2 (value), got field ${number}`);
      }
    }
    key ??= scalarDefault(mapKeyType(field), undefined) as ProtoMapKey;
    value ??= nested ? emptyMessage() : scalarDefault(field.type, enumTypeOf(field));
    return [key, value];
  }

  private value(field: protobuf.Field, wire: number, path: string, depth: number, end: number, into: ProtoMessage | undefined): ProtoValue {
    const nested = messageTypeOf(field);
    if (!nested) return this.scalar(field.type, enumTypeOf(field), field, path, end);
    const target = into ?? emptyMessage();
    if (wire === WIRE.SGROUP) this.message(nested, target, path, depth + 1, end, field.id);
    else this.message(nested, target, path, depth + 1, this.lengthEnd(path, end), undefined);
    return target;
  }

  private scalar(type: string, enumType: protobuf.Enum | undefined, field: protobuf.Field, path: string, end: number): ProtoValue {
    if (enumType) {
      const n = Number(BigInt.asIntN(32, this.varint(path, end)));
      if (protoFeature(enumType, 'enum_type') === 'CLOSED' && !Object.values(enumType.values).includes(n)) {
        throw new SchemaViolationError(path, `${n} is not a value of the closed enum ${enumType.name}`);
      }
      return n;
    }
    switch (type) {
      case 'int32':
        return Number(BigInt.asIntN(32, this.varint(path, end)));
      case 'uint32':
        return Number(BigInt.asUintN(32, this.varint(path, end)));
      case 'sint32':
        return Number(unzigzag(BigInt.asUintN(32, this.varint(path, end))));
      case 'int64':
        return BigInt.asIntN(64, this.varint(path, end));
      case 'uint64':
        return this.varint(path, end);
      case 'sint64':
        return unzigzag(this.varint(path, end));
      case 'bool':
        return this.varint(path, end) !== 0n;
      case 'fixed32':
        return this.take(4, path, end).readUInt32LE(0);
      case 'sfixed32':
        return this.take(4, path, end).readInt32LE(0);
      case 'float':
        return this.take(4, path, end).readFloatLE(0);
      case 'fixed64':
        return this.take(8, path, end).readBigUInt64LE(0);
      case 'sfixed64':
        return this.take(8, path, end).readBigInt64LE(0);
      case 'double':
        return this.take(8, path, end).readDoubleLE(0);
      case 'bytes':
        return Buffer.from(this.take(this.lengthEnd(path, end) - this.pos, path, end));
      case 'string': {
        const bytes = this.take(this.lengthEnd(path, end) - this.pos, path, end);
        if (protoFeature(field, 'utf8_validation') !== 'VERIFY') return bytes.toString('utf8');
        try {
          return utf8.decode(bytes);
        } catch {
          throw new SchemaViolationError(path, 'a string field must hold valid UTF-8');
        }
      }
      default:
        throw new Error(`Orderly cannot decode the protobuf type ${type}`);
    }
  }

  private expectWire(field: protobuf.Field, wire: number, expected: number, path: string): void {
    if (wire !== expected) {
      throw new SchemaViolationError(
        path,
        `field ${field.name} (${field.type}, number ${field.id}) is written with wire type ${WIRE_NAMES[expected]}, got ${WIRE_NAMES[wire]}`,
      );
    }
  }

  /** Reads a length prefix and returns where the value ends. */
  private lengthEnd(path: string, end: number): number {
    const n = this.varint(path, end);
    if (n > BigInt(end - this.pos)) throw new SchemaViolationError(path, `length ${n} runs past the end of the data`);
    return this.pos + Number(n);
  }

  private varint(path: string, end: number): bigint {
    let result = 0n;
    for (let shift = 0n; shift < 70n; shift += 7n) {
      if (this.pos >= end) throw new SchemaViolationError(path, 'data ends inside a varint');
      const b = this.buf[this.pos++]!;
      result |= BigInt(b & 0x7f) << shift;
      if (b < 0x80) return BigInt.asUintN(64, result);
    }
    throw new SchemaViolationError(path, 'a varint longer than 10 bytes');
  }

  private take(n: number, path: string, end: number): Buffer {
    if (this.pos + n > end) throw new SchemaViolationError(path, 'data ends inside a value');
    const slice = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return slice;
  }
}

function unzigzag(n: bigint): bigint {
  return (n >> 1n) ^ -(n & 1n);
}

function keyWireType(keyType: string): number {
  if (['fixed32', 'sfixed32'].includes(keyType)) return WIRE.I32;
  if (['fixed64', 'sfixed64'].includes(keyType)) return WIRE.I64;
  return keyType === 'string' ? WIRE.LEN : WIRE.VARINT;
}
