import avsc from 'avsc';
import fc from 'fast-check';
import protobuf from 'protobufjs';
import { describe, expect, it } from 'vitest';
import { FailedPreconditionError, InvalidArgumentError } from '../../src/core/errors.js';
import {
  decodeMessage,
  messageSchemaError,
  parseEncoding,
  schemaAttributes,
  validateAgainstRevisions,
  type Encoding,
  type RevisionDefinition,
} from '../../src/schema/message-validation.js';
import { compileSchema, type AvroSchema, type ProtoSchema } from '../../src/schema/schema-definition.js';
import { SchemaViolationError } from '../../src/schema/schema-violation.js';

const ORDER_AVRO = {
  type: 'record',
  name: 'Order',
  namespace: 'shop',
  fields: [
    { name: 'id', type: 'string' },
    { name: 'amount', type: 'long' },
    { name: 'note', type: ['null', 'string'], default: null },
    { name: 'status', type: { type: 'enum', name: 'Status', symbols: ['NEW', 'PAID'] } },
    {
      name: 'lines',
      type: {
        type: 'array',
        items: {
          type: 'record',
          name: 'Line',
          fields: [
            { name: 'sku', type: 'string' },
            { name: 'qty', type: 'int' },
          ],
        },
      },
    },
    { name: 'tags', type: { type: 'map', values: 'double' } },
    { name: 'payload', type: 'bytes' },
    { name: 'digest', type: { type: 'fixed', name: 'Digest', size: 2 } },
    { name: 'ratio', type: 'float' },
    { name: 'choice', type: ['null', 'int', 'Line'] },
    { name: 'ok', type: 'boolean' },
  ],
};

const ORDER_PROTO = `syntax = "proto3";
package shop;
message Order {
  string id = 1;
  int64 amount = 2;
  optional string note = 3;
  enum Status { NEW = 0; PAID = 1; }
  Status status = 4;
  message Line { string sku = 1; int32 qty = 2; }
  repeated Line lines = 5;
  map<string, double> tags = 6;
  bytes payload = 7;
  uint64 big = 8;
  sint64 delta = 9;
  fixed64 f64 = 10;
  sfixed32 s32 = 11;
  repeated int32 counts = 12;
  map<int32, string> by_number = 13;
  oneof pay { string card = 14; int32 cash = 15; }
  bool ok = 16;
  double price = 17;
  uint32 u32 = 18;
}`;

const avroOrder = compileSchema('AVRO', JSON.stringify(ORDER_AVRO)) as AvroSchema;
const protoOrder = compileSchema('PROTOCOL_BUFFER', ORDER_PROTO) as ProtoSchema;
const Order = protoOrder.message;

/** An Avro value of ORDER_AVRO in the decoded representation (wrapped unions, bigint long). */
const avroValue = {
  id: 'o-1',
  amount: 9007199254740993n,
  note: { string: 'leave at door' },
  status: 'PAID',
  lines: [
    { sku: 'a', qty: 2 },
    { sku: 'b', qty: -1 },
  ],
  tags: { vip: 1.5 },
  payload: Buffer.from([0, 1, 254, 255]),
  digest: Buffer.from([9, 200]),
  ratio: 0.5,
  choice: { 'shop.Line': { sku: 'c', qty: 3 } },
  ok: true,
};

/** The same value in Avro's JSON encoding, written by hand (the big long as an integer literal). */
const avroJsonText = `{
  "id": "o-1", "amount": 9007199254740993, "note": {"string": "leave at door"}, "status": "PAID",
  "lines": [{"sku": "a", "qty": 2}, {"sku": "b", "qty": -1}], "tags": {"vip": 1.5},
  "payload": "\\u0000\\u0001\\u00fe\\u00ff", "digest": "\\t\\u00c8", "ratio": 0.5,
  "choice": {"shop.Line": {"sku": "c", "qty": 3}}, "ok": true
}`;

function violation(fn: () => unknown): SchemaViolationError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(SchemaViolationError);
    expect((e as SchemaViolationError).code).toBe('INVALID_ARGUMENT');
    return e as SchemaViolationError;
  }
  throw new Error('expected the data to be refused');
}

const decode = (schema: AvroSchema | ProtoSchema, encoding: Encoding, data: Buffer | string) =>
  decodeMessage(schema, encoding, typeof data === 'string' ? Buffer.from(data) : data).value;

describe('Avro BINARY', () => {
  it('decodes every type, a union branch, nested records and a long beyond 2^53 exactly', () => {
    const data = avroOrder.avro.toBuffer(avroValue);
    expect(decode(avroOrder, 'BINARY', data)).toEqual(avroValue);
  });

  it('decodes what avsc encodes, for random values of the schema', () => {
    fc.assert(
      fc.property(fc.integer(), () => {
        const value = avroOrder.avro.random();
        const data = avroOrder.avro.toBuffer(value);
        expect(decode(avroOrder, 'BINARY', data)).toEqual(avroOrder.avro.fromBuffer(data));
      }),
      { numRuns: 200 },
    );
  });

  it('refuses data cut short or running on, an enum or union index out of range, an int past 32 bits', () => {
    const data = avroOrder.avro.toBuffer(avroValue);
    expect(violation(() => decode(avroOrder, 'BINARY', data.subarray(0, data.length - 1))).message).toBe(
      'data: does not match the schema at .ok: data ends inside a value',
    );
    expect(violation(() => decode(avroOrder, 'BINARY', Buffer.concat([data, Buffer.from([0, 0])]))).message).toBe(
      'data: does not match the schema: 2 bytes left over after the Avro value (the data must be exactly one binary-encoded value)',
    );
    const enumType = compileSchema('AVRO', '{"type": "enum", "name": "E", "symbols": ["A", "B"]}') as AvroSchema;
    expect(violation(() => decode(enumType, 'BINARY', Buffer.from([4]))).reason).toBe('enum E has no symbol at index 2 (it has 2)');
    const union = compileSchema('AVRO', '["null", "string"]') as AvroSchema;
    expect(violation(() => decode(union, 'BINARY', Buffer.from([4]))).reason).toBe(
      'union branch index 2 out of range (the union has 2 branches)',
    );
    const int = compileSchema('AVRO', '"int"') as AvroSchema;
    expect(violation(() => decode(int, 'BINARY', Buffer.from([0x80, 0x80, 0x80, 0x80, 0x10]))).reason).toBe(
      '2147483648 does not fit an int (32 bits)',
    );
  });

  it('refuses an array block claiming more items than the data holds, and unbounded empty items', () => {
    const longs = compileSchema('AVRO', '{"type": "array", "items": "long"}') as AvroSchema;
    expect(violation(() => decode(longs, 'BINARY', Buffer.from([0xfe, 0xff, 0xff, 0xff, 0x0f, 2]))).reason).toBe(
      'a block claims 2147483647 items but only 1 bytes remain',
    );
    const nulls = compileSchema('AVRO', '{"type": "array", "items": "null"}') as AvroSchema;
    expect(decode(nulls, 'BINARY', Buffer.from([6, 0]))).toEqual([null, null, null]);
    expect(violation(() => decode(nulls, 'BINARY', Buffer.from([0xfe, 0xff, 0xff, 0xff, 0x0f, 0]))).reason).toBe(
      'more than 1000000 empty array items',
    );
  });
});

describe('Avro JSON (Avro JSON encoding, as Pub/Sub reads it)', () => {
  it('decodes the JSON encoding to the same value as the binary encoding', () => {
    expect(decode(avroOrder, 'JSON', avroJsonText)).toEqual(avroValue);
    expect(decode(avroOrder, 'JSON', avroJsonText)).toEqual(decode(avroOrder, 'BINARY', avroOrder.avro.toBuffer(avroValue)));
  });

  it('needs a union value wrapped in its branch name, and says how to write it', () => {
    const bare = avroJsonText.replace('{"string": "leave at door"}', '"leave at door"');
    const e = violation(() => decode(avroOrder, 'JSON', bare));
    expect(e.path).toBe('.note');
    expect(e.reason).toBe(
      `Avro's JSON encoding writes a union value as null or as an object naming its branch (write {"string": "leave at door"}); got "leave at door"`,
    );
    expect(decode(avroOrder, 'JSON', avroJsonText.replace('{"string": "leave at door"}', 'null'))).toMatchObject({ note: null });
    const shortName = avroJsonText.replace('"shop.Line"', '"Line"');
    expect(violation(() => decode(avroOrder, 'JSON', shortName)).reason).toContain('branches: null, int, shop.Line');
  });

  it('needs every field, also one with a default, and refuses unknown fields', () => {
    const missing = avroJsonText.replace('"note": {"string": "leave at door"}, ', '');
    expect(violation(() => decode(avroOrder, 'JSON', missing)).message).toBe(
      "data: does not match the schema at .note: missing; Avro's JSON encoding needs every field of a record, also one with a default",
    );
    const extra = avroJsonText.replace('"ok": true', '"ok": true, "color": "red"');
    expect(violation(() => decode(avroOrder, 'JSON', extra)).message).toBe(
      'data: does not match the schema at .color: no such field in record shop.Order',
    );
  });

  it('refuses values of the wrong type, naming where', () => {
    const cases: Array<[string, string, string]> = [
      ['"status": "PAID"', '"status": "LOST"', '.status: expected one of the symbols NEW, PAID for Avro shop.Status, got "LOST"'],
      ['"qty": 2', '"qty": 2.5', '.lines[0].qty: expected an integer, got 2.5'],
      ['"qty": 2', '"qty": 2147483648', '.lines[0].qty: 2147483648 is out of range (-2147483648 to 2147483647)'],
      [
        '"amount": 9007199254740993',
        '"amount": 9223372036854775808',
        '.amount: 9223372036854775808 is out of range (-9223372036854775808 to 9223372036854775807)',
      ],
      [
        '"amount": 9007199254740993',
        '"amount": 1e19',
        '.amount: 10000000000000000000 is beyond 2^53 and written with a fraction or exponent; write it as a plain integer',
      ],
      ['"id": "o-1"', '"id": 1', '.id: expected a string for Avro string, got 1'],
      ['"digest": "\\t\\u00c8"', '"digest": "abc"', '.digest: fixed shop.Digest takes exactly 2 bytes, got 3'],
      [
        '"payload": "\\u0000\\u0001\\u00fe\\u00ff"',
        '"payload": "\\u0100"',
        '.payload: bytes are written as characters \\u0000 to \\u00ff, one per byte; character 0 is U+0100',
      ],
      ['"tags": {"vip": 1.5}', '"tags": {"vip": "x"}', '.tags["vip"]: expected a number for Avro double, got "x"'],
      ['"ok": true', '"ok": "true"', '.ok: expected true or false for Avro boolean, got "true"'],
      ['"ratio": 0.5', '"ratio": 1e39', '.ratio: 1e+39 is out of range for a float'],
    ];
    for (const [from, to, expected] of cases) {
      const text = avroJsonText.replace(from, to);
      expect(text, from).not.toBe(avroJsonText);
      expect(violation(() => decode(avroOrder, 'JSON', text)).message).toBe(`data: does not match the schema at ${expected}`);
    }
    expect(decode(avroOrder, 'JSON', avroJsonText.replace('"qty": 2', '"qty": 2.0'))).toMatchObject({ lines: [{ qty: 2 }, { qty: -1 }] });
    expect(decode(avroOrder, 'JSON', avroJsonText.replace('"ratio": 0.5', '"ratio": "NaN"'))).toMatchObject({ ratio: NaN });
    // A float's largest value as Java prints it (3.4028235e38) is a bit above it as a double, and rounds to it.
    expect(decode(avroOrder, 'JSON', avroJsonText.replace('"ratio": 0.5', '"ratio": 3.4028235e38'))).toMatchObject({
      ratio: Math.fround(3.4028235e38),
    });
  });

  it('rounds a float to 32 bits, as the binary encoding carries it', () => {
    const schema = compileSchema('AVRO', '{"type": "record", "name": "M", "fields": [{"name": "f", "type": "float"}]}') as AvroSchema;
    const binary = decode(schema, 'BINARY', schema.avro.toBuffer({ f: 0.1 }));
    expect(binary).toEqual({ f: 0.10000000149011612 });
    expect(decode(schema, 'JSON', '{"f": 0.1}')).toEqual(binary);
    expect(decode(schema, 'JSON', '{"f": 1e-50}')).toEqual({ f: 0 });
    expect(decode(schema, 'JSON', '{"f": 16777217}')).toEqual({ f: 16777216 });
  });

  it('refuses data that is not UTF-8 or not JSON', () => {
    expect(violation(() => decode(avroOrder, 'JSON', Buffer.from([0x7b, 0xff, 0x7d]))).message).toBe(
      'data: does not match the schema: JSON-encoded data must be UTF-8 text',
    );
    expect(violation(() => decode(avroOrder, 'JSON', '{"id": }')).message).toBe(
      'data: does not match the schema: not valid JSON: unexpected "}" at line 1, column 8',
    );
  });
});

/** protobufjs (an independent encoder) writes the message; Orderly's decoder reads it. */
const encodeProto = (object: Record<string, unknown>) => Buffer.from(Order.encode(Order.fromObject(object)).finish());

const protoObject = {
  id: 'o-1',
  amount: '-9223372036854775808',
  note: '',
  status: 1,
  lines: [{ sku: 'a', qty: 2 }, { sku: 'b' }],
  tags: { vip: 1.5 },
  payload: Buffer.from([0, 255]),
  big: '18446744073709551615',
  delta: '-9007199254740993',
  f64: '9007199254740993',
  s32: -7,
  counts: [1, -1, 300],
  by_number: { '-5': 'minus five', '7': 'seven' },
  cash: 12,
  ok: true,
  price: 2.5,
  u32: 4294967295,
};

const protoDecoded = {
  id: 'o-1',
  amount: -9223372036854775808n,
  note: '',
  status: 1,
  lines: [
    { sku: 'a', qty: 2 },
    { sku: 'b', qty: 0 },
  ],
  tags: new Map([['vip', 1.5]]),
  payload: Buffer.from([0, 255]),
  big: 18446744073709551615n,
  delta: -9007199254740993n,
  f64: 9007199254740993n,
  s32: -7,
  counts: [1, -1, 300],
  by_number: new Map([
    [-5, 'minus five'],
    [7, 'seven'],
  ]),
  cash: 12,
  ok: true,
  price: 2.5,
  u32: 4294967295,
};

describe('Protocol Buffers BINARY (wire format)', () => {
  it('decodes every type, 64-bit extremes exactly, maps with typed keys, a oneof member, and proto3 defaults', () => {
    expect(decode(protoOrder, 'BINARY', encodeProto(protoObject))).toEqual(protoDecoded);
    // An empty message is valid: every implicit field has its default, fields with presence stay unset.
    expect(decode(protoOrder, 'BINARY', Buffer.alloc(0))).toEqual({
      id: '',
      amount: 0n,
      status: 0,
      lines: [],
      tags: new Map(),
      payload: Buffer.alloc(0),
      big: 0n,
      delta: 0n,
      f64: 0n,
      s32: 0,
      counts: [],
      by_number: new Map(),
      ok: false,
      price: 0,
      u32: 0,
    });
  });

  it('decodes 64-bit integers of every encoding exactly, for random values', () => {
    const schema = compileSchema(
      'PROTOCOL_BUFFER',
      'syntax = "proto3"; message M { int64 a = 1; uint64 b = 2; sint64 c = 3; fixed64 d = 4; sfixed64 e = 5; }',
    ) as ProtoSchema;
    fc.assert(
      fc.property(
        fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
        fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
        (signed, unsigned) => {
          const M = schema.message;
          const data = Buffer.from(
            M.encode(
              M.fromObject({ a: String(signed), b: String(unsigned), c: String(signed), d: String(unsigned), e: String(signed) }),
            ).finish(),
          );
          expect(decode(schema, 'BINARY', data)).toEqual({ a: signed, b: unsigned, c: signed, d: unsigned, e: signed });
        },
      ),
      { numRuns: 300 },
    );
  });

  it('reads repeated scalars packed or unpacked, merges a message field given twice, keeps the last singular value', () => {
    const packed = encodeProto({ counts: [1, 2] });
    const unpacked = Buffer.from([0x60, 1, 0x60, 2]); // field 12, varint, twice
    expect(decode(protoOrder, 'BINARY', packed)).toMatchObject({ counts: [1, 2] });
    expect(decode(protoOrder, 'BINARY', unpacked)).toMatchObject({ counts: [1, 2] });
    const M = compileSchema(
      'PROTOCOL_BUFFER',
      'syntax = "proto3"; message M { N n = 1; string s = 2; message N { int32 a = 1; int32 b = 2; } }',
    ) as ProtoSchema;
    // n = {a: 1}, then n = {b: 2}, s = "x" then s = "y"
    const twice = Buffer.from([0x0a, 2, 0x08, 1, 0x0a, 2, 0x10, 2, 0x12, 1, 0x78, 0x12, 1, 0x79]);
    expect(decode(M, 'BINARY', twice)).toEqual({ n: { a: 1, b: 2 }, s: 'y' });
  });

  it('refuses a field number the message does not declare (Pub/Sub does; an ordinary parser keeps it as unknown)', () => {
    const data = Buffer.concat([encodeProto(protoObject), Buffer.from([0xa0, 0x06, 1])]); // field 100, varint 1
    expect(violation(() => decode(protoOrder, 'BINARY', data)).message).toBe(
      'data: does not match the schema: field number 100 is not declared in message Order (wire type VARINT)',
    );
    // lines[0] holding field 3, which Line does not declare
    expect(violation(() => decode(protoOrder, 'BINARY', Buffer.from([0x2a, 2, 0x18, 1]))).message).toBe(
      'data: does not match the schema at .lines[0]: field number 3 is not declared in message Line (wire type VARINT)',
    );
  });

  it('refuses a wrong wire type, truncation, invalid UTF-8 in a proto3 string, and a bad varint', () => {
    expect(violation(() => decode(protoOrder, 'BINARY', Buffer.from([0x08, 1]))).message).toBe(
      'data: does not match the schema at .id: field id (string, number 1) is written with wire type LEN, got VARINT',
    );
    expect(violation(() => decode(protoOrder, 'BINARY', Buffer.from([0x0a, 5, 0x61]))).reason).toBe(
      'length 5 runs past the end of the data',
    );
    expect(violation(() => decode(protoOrder, 'BINARY', Buffer.from([0x0a, 2, 0xc3, 0x28]))).message).toBe(
      'data: does not match the schema at .id: a string field must hold valid UTF-8',
    );
    expect(violation(() => decode(protoOrder, 'BINARY', Buffer.from([0x10, ...Array(10).fill(0xff), 1]))).reason).toBe(
      'a varint longer than 10 bytes',
    );
    // proto2 does not verify UTF-8 (Java's parser does not either).
    const p2 = compileSchema('PROTOCOL_BUFFER', 'syntax = "proto2"; message M { optional string s = 1; }') as ProtoSchema;
    expect(decode(p2, 'BINARY', Buffer.from([0x0a, 1, 0xff]))).toEqual({ s: '\ufffd' });
  });

  it('refuses an unknown value of a closed (proto2) enum and a missing required field; keeps an unknown open enum value', () => {
    const p2 = compileSchema(
      'PROTOCOL_BUFFER',
      'syntax = "proto2"; message M { enum E { A = 1; B = 2; } optional E e = 1; required int32 r = 2; }',
    ) as ProtoSchema;
    expect(decode(p2, 'BINARY', Buffer.from([0x08, 2, 0x10, 0]))).toEqual({ e: 2, r: 0 });
    expect(violation(() => decode(p2, 'BINARY', Buffer.from([0x08, 3, 0x10, 0]))).message).toBe(
      'data: does not match the schema at .e: 3 is not a value of the closed enum E',
    );
    expect(violation(() => decode(p2, 'BINARY', Buffer.from([0x08, 1]))).message).toBe(
      'data: does not match the schema at .r: required field of M is missing',
    );
    expect(decode(protoOrder, 'BINARY', Buffer.from([0x20, 9]))).toMatchObject({ status: 9 });
  });

  it('reads proto2 groups', () => {
    const g = compileSchema(
      'PROTOCOL_BUFFER',
      'syntax = "proto2"; message M { optional group G = 1 { optional int32 a = 2; } }',
    ) as ProtoSchema;
    expect(decode(g, 'BINARY', Buffer.from([0x0b, 0x10, 5, 0x0c]))).toEqual({ g: { a: 5 } });
    expect(violation(() => decode(g, 'BINARY', Buffer.from([0x0b, 0x10, 5]))).reason).toBe('group 1 is not closed');
  });
});

describe('Protocol Buffers JSON (proto3 JSON mapping)', () => {
  const json = (o: unknown) => JSON.stringify(o);

  it('decodes to the same value as the wire format, with JSON or proto field names', () => {
    const text = `{"id": "o-1", "amount": "-9223372036854775808", "note": "", "status": "PAID", "lines": [{"sku": "a", "qty": 2}, {"sku": "b"}],
      "tags": {"vip": 1.5}, "payload": "AP8=", "big": "18446744073709551615", "delta": -9007199254740993, "f64": 9007199254740993,
      "s32": "-7", "counts": [1, -1, "300"], "byNumber": {"-5": "minus five", "7": "seven"}, "cash": 12, "ok": true, "price": 2.5, "u32": 4294967295}`;
    expect(decode(protoOrder, 'JSON', text)).toEqual(protoDecoded);
    expect(decode(protoOrder, 'JSON', text.replace('"byNumber"', '"by_number"'))).toEqual(protoDecoded);
  });

  it('reads what protobufjs writes as JSON', () => {
    const object = Order.toObject(Order.fromObject(protoObject), { longs: String, enums: String, bytes: String, json: true });
    expect(decode(protoOrder, 'JSON', json(object))).toEqual(protoDecoded);
  });

  it('accepts enum numbers, null as unset, integral strings, special floats and URL-safe base64', () => {
    expect(decode(protoOrder, 'JSON', json({ status: 1, note: null, cash: '1e2', price: '-Infinity', payload: '-_8' }))).toMatchObject({
      status: 1,
      cash: 100,
      price: -Infinity,
      payload: Buffer.from([0xfb, 0xff]),
    });
    expect(decode(protoOrder, 'JSON', json({ note: null }))).not.toHaveProperty('note');
  });

  it('rounds a float to 32 bits, as the wire format carries it, and refuses one beyond float range', () => {
    const schema = compileSchema('PROTOCOL_BUFFER', 'syntax = "proto3"; message M { float f = 1; repeated float r = 2; }') as ProtoSchema;
    const binary = decode(schema, 'BINARY', Buffer.from(schema.message.encode({ f: 0.1, r: [0.1] }).finish()));
    expect(binary).toEqual({ f: 0.10000000149011612, r: [0.10000000149011612] });
    expect(decode(schema, 'JSON', '{"f": 0.1, "r": [0.1]}')).toEqual(binary);
    expect(decode(schema, 'JSON', '{"f": "0.1", "r": ["1e-50"]}')).toEqual({ f: 0.10000000149011612, r: [0] });
    // Java prints the largest float as 3.4028235e38, a little above it as a double; it reads back as that float.
    expect(decode(schema, 'JSON', '{"f": 3.4028235e38}')).toEqual({ f: Math.fround(3.4028235e38), r: [] });
    expect(violation(() => decode(schema, 'JSON', '{"f": 1e39}')).message).toBe(
      'data: does not match the schema at .f: 1e+39 is out of range for a float',
    );
  });

  it('refuses unknown fields, a field given twice, two members of a oneof, and wrongly typed values', () => {
    const cases: Array<[unknown, string]> = [
      [{ colour: 'red' }, '.colour: no such field in message Order'],
      [{ by_number: {}, byNumber: {} }, '.by_number: the field is given twice (as "by_number" and "byNumber")'],
      [{ card: 'x', cash: 1 }, '.cash: card and cash belong to the same oneof pay; only one may be set'],
      [{ id: 5 }, '.id: expected a JSON string for string field id, got 5'],
      [{ s32: 1.5 }, '.s32: expected an integer, got 1.5'],
      [{ s32: '1.5' }, '.s32: expected an integer, got "1.5"'],
      [{ s32: 2147483648 }, '.s32: 2147483648 is out of range for sfixed32 (-2147483648 to 2147483647)'],
      [{ big: '-1' }, '.big: -1 is out of range for uint64 (0 to 18446744073709551615)'],
      [{ status: 'LOST' }, '.status: "LOST" is not a value of enum Status (NEW, PAID)'],
      [{ payload: 'not base64!' }, '.payload: bytes must be base64 (the standard or the URL-safe alphabet)'],
      [{ counts: [1, null] }, '.counts[1]: a repeated field cannot hold null'],
      [{ by_number: { x: 'y' } }, '.by_number["x"]: "x" is not a int32 map key'],
      [{ lines: [{ sku: 'a', weight: 1 }] }, '.lines[0].weight: no such field in message Line'],
      [{ ok: 1 }, '.ok: expected true or false for bool field ok, got 1'],
      [{ tags: { a: null } }, '.tags["a"]: a map value cannot be null'],
    ];
    for (const [value, expected] of cases)
      expect(violation(() => decode(protoOrder, 'JSON', json(value))).message).toBe(`data: does not match the schema at ${expected}`);
    expect(violation(() => decode(protoOrder, 'JSON', '[1]')).message).toBe(
      'data: does not match the schema: expected a JSON object for message Order, got [1]',
    );
  });
});

describe('revision ranges (newest first, stamped revision)', () => {
  const r1 = 'syntax = "proto3"; message E { string user = 1; }';
  const r2 = 'syntax = "proto3"; message E { string user = 1; optional string device = 2; }';
  const r3 = 'syntax = "proto3"; message E { string user = 1; optional string device = 2; optional int64 at = 3; }';
  const revisions: RevisionDefinition[] = [
    { revisionId: 'aaaaaaa1', definition: r1 },
    { revisionId: 'bbbbbbb2', definition: r2 },
    { revisionId: 'ccccccc3', definition: r3 },
  ];
  const E = (compileSchema('PROTOCOL_BUFFER', r3) as ProtoSchema).message;
  const data = (o: Record<string, unknown>) => Buffer.from(E.encode(E.fromObject(o)).finish());
  const validate = (range: { firstRevisionId?: string; lastRevisionId?: string }, d: Buffer, revs = revisions) =>
    validateAgainstRevisions('PROTOCOL_BUFFER', revs, range, 'BINARY', d);

  it('matches the newest revision that accepts the data', () => {
    expect(validate({}, data({ user: 'u' })).revisionId).toBe('ccccccc3');
    expect(validate({}, data({ user: 'u', at: 5 })).decoded.value).toEqual({ user: 'u', at: 5n });
    expect(validate({ lastRevisionId: 'bbbbbbb2' }, data({ user: 'u', device: 'phone' })).revisionId).toBe('bbbbbbb2');
    expect(validate({ firstRevisionId: 'aaaaaaa1', lastRevisionId: 'aaaaaaa1' }, data({ user: 'u' })).revisionId).toBe('aaaaaaa1');
  });

  it('refuses data no revision in range accepts, reporting the newest revision', () => {
    const e = violation(() => validate({ lastRevisionId: 'bbbbbbb2' }, data({ user: 'u', at: 5 })));
    expect(e.message).toBe(
      "data: does not match the schema: field number 3 is not declared in message E (wire type VARINT) (checked against revision bbbbbbb2; none of the 2 revisions in the topic's range accepts the data)",
    );
    expect(violation(() => validate({ firstRevisionId: 'ccccccc3' }, Buffer.from([0x08, 1]))).message).toBe(
      'data: does not match the schema at .user: field user (string, number 1) is written with wire type LEN, got VARINT',
    );
  });

  it('skips deleted revisions, which keep their place in the range', () => {
    // bbbbbbb2 is deleted: the range aaaaaaa1..bbbbbbb2 then holds aaaaaaa1 alone.
    const withDeleted = [revisions[0]!, { revisionId: 'bbbbbbb2' }, revisions[2]!];
    const range = { firstRevisionId: 'aaaaaaa1', lastRevisionId: 'bbbbbbb2' };
    expect(validate(range, data({ user: 'u' }), withDeleted).revisionId).toBe('aaaaaaa1');
    expect(validate(range, data({ user: 'u', device: 'phone' })).revisionId).toBe('bbbbbbb2');
    expect(violation(() => validate(range, data({ user: 'u', device: 'phone' }), withDeleted)).reason).toBe(
      'field number 2 is not declared in message E (wire type LEN)',
    );
  });

  it('is FAILED_PRECONDITION when the range names a revision that never existed or holds no live revision', () => {
    expect(() => validate({ firstRevisionId: 'deadbeef' }, data({ user: 'u' }))).toThrow(FailedPreconditionError);
    expect(() => validate({ firstRevisionId: 'deadbeef' }, data({ user: 'u' }))).toThrow(
      "the topic's schemaSettings.firstRevisionId names revision deadbeef, which the schema does not have",
    );
    const onlyDeleted = [revisions[0]!, { revisionId: 'bbbbbbb2' }, revisions[2]!];
    expect(() => validate({ firstRevisionId: 'bbbbbbb2', lastRevisionId: 'bbbbbbb2' }, data({ user: 'u' }), onlyDeleted)).toThrow(
      "no revision of the topic's schema is left in its range bbbbbbb2 to bbbbbbb2; update the topic's schemaSettings",
    );
  });

  it('gives publish an INVALID_ARGUMENT naming the message index, and the schema attributes', () => {
    const e = violation(() => validate({}, Buffer.from([0xff])));
    const atIndex = messageSchemaError(3, e);
    expect(atIndex).toBeInstanceOf(InvalidArgumentError);
    expect(atIndex.field).toBe('messages[3].data');
    expect(atIndex.message).toMatch(/^messages\[3\]\.data: does not match the schema/);
    expect(schemaAttributes('projects/p/schemas/s', 'ccccccc3', 'BINARY')).toEqual({
      googclient_schemaname: 'projects/p/schemas/s',
      googclient_schemarevisionid: 'ccccccc3',
      googclient_schemaencoding: 'BINARY',
    });
  });

  it('parses encodings as the API gives them and refuses an unspecified one', () => {
    expect(parseEncoding('JSON', 'encoding')).toBe('JSON');
    expect(parseEncoding(2, 'encoding')).toBe('BINARY');
    expect(() => parseEncoding('ENCODING_UNSPECIFIED', 'schemaSettings.encoding')).toThrow(
      'schemaSettings.encoding: must be JSON or BINARY, got "ENCODING_UNSPECIFIED"',
    );
  });
});

describe('independent reading of what the decoders accept', () => {
  it('an Avro value decoded from JSON re-encodes to bytes plain avsc reads back', () => {
    const plain = avsc.Type.forSchema(
      {
        type: 'record',
        name: 'R',
        fields: [
          { name: 'u', type: ['null', 'string'] },
          { name: 'n', type: 'long' },
        ],
      },
      { wrapUnions: true },
    );
    const schema = compileSchema('AVRO', JSON.stringify(plain.schema())) as AvroSchema;
    const value = decode(schema, 'JSON', '{"u": {"string": "x"}, "n": 42}');
    expect(plain.fromBuffer(schema.avro.toBuffer(value))).toEqual({ u: { string: 'x' }, n: 42 });
  });

  it('a protobuf message decoded from JSON matches protobufjs decoding the same message from the wire', () => {
    const M = protobuf
      .parse('syntax = "proto3"; message M { string s = 1; repeated int32 r = 2; }', { keepCase: true })
      .root.lookupType('M');
    const schema = compileSchema('PROTOCOL_BUFFER', 'syntax = "proto3"; message M { string s = 1; repeated int32 r = 2; }') as ProtoSchema;
    const wire = Buffer.from(M.encode(M.fromObject({ s: 'é', r: [3, 4] })).finish());
    expect(decode(schema, 'JSON', '{"s": "é", "r": [3, 4]}')).toEqual(decode(schema, 'BINARY', wire));
    expect(M.toObject(M.decode(wire))).toEqual({ s: 'é', r: [3, 4] });
  });
});
