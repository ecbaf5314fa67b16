import { describe, expect, it } from 'vitest';
import { InvalidArgumentError } from '../../src/core/errors.js';
import { compileSchema, MAX_DEFINITION_BYTES } from '../../src/schema/schema-definition.js';

const avro = (schema: unknown) => compileSchema('AVRO', typeof schema === 'string' ? schema : JSON.stringify(schema));
const proto = (definition: string) => compileSchema('PROTOCOL_BUFFER', definition);

function refusal(fn: () => unknown): InvalidArgumentError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(InvalidArgumentError);
    return e as InvalidArgumentError;
  }
  throw new Error('expected the definition to be refused');
}

describe('schema definitions: Avro', () => {
  it('accepts Pub/Sub documentation examples and every Avro type', () => {
    const inventory = avro({
      type: 'record',
      name: 'Avro',
      fields: [
        { name: 'ProductName', type: 'string', default: '' },
        { name: 'SKU', type: 'int', default: 0 },
        { name: 'InStock', type: 'boolean', default: false },
      ],
    });
    expect(inventory.type).toBe('AVRO');
    const all = avro({
      type: 'record',
      name: 'All',
      namespace: 'my.ns',
      fields: [
        { name: 'n', type: 'null' },
        { name: 'l', type: 'long', default: 1 },
        { name: 'f', type: 'float' },
        { name: 'd', type: 'double' },
        { name: 'b', type: 'bytes' },
        { name: 'e', type: { type: 'enum', name: 'E', symbols: ['A', 'B'] } },
        { name: 'a', type: { type: 'array', items: 'E' } },
        { name: 'm', type: { type: 'map', values: 'long' } },
        { name: 'x', type: { type: 'fixed', name: 'X', size: 4 } },
        { name: 'u', type: ['null', 'string'], default: null },
        { name: 'ts', type: { type: 'long', logicalType: 'timestamp-micros' } },
      ],
    });
    expect(all.type === 'AVRO' && all.avro.name).toBe('my.ns.All');
  });

  it('keeps a long default beyond 2^53 exact', () => {
    const s = avro('{"type": "record", "name": "R", "fields": [{"name": "l", "type": "long", "default": 9007199254740993}]}');
    expect(s.type === 'AVRO' && (s.avro as unknown as { fields: Array<{ defaultValue(): unknown }> }).fields[0]!.defaultValue()).toBe(
      9007199254740993n,
    );
  });

  it('refuses text that is not JSON, naming line and column', () => {
    const e = refusal(() => avro('{\n  "type": "record",\n  "name": "R"\n  "fields": []\n}'));
    expect(e.field).toBe('schema.definition');
    expect(e.message).toBe(
      `schema.definition: not valid JSON (an Avro schema is JSON): expected '}', got "\\"fields\\": []" at line 4, column 3`,
    );
  });

  it('refuses invalid Avro schemas with what is wrong', () => {
    expect(refusal(() => avro({ type: 'record', name: 'R', fields: [{ name: 'a', type: 'strin' }] })).message).toBe(
      'schema.definition: not a valid Avro schema: undefined type name: strin',
    );
    expect(refusal(() => avro({ type: 'record', fields: [] })).message).toContain('missing name property');
    expect(refusal(() => avro({ type: 'record', name: 'R', fields: [{ name: 'a', type: 'int', default: 'x' }] })).message).toContain(
      'invalid "int": "x"',
    );
    expect(refusal(() => avro({ type: 'enum', name: 'E', symbols: ['A', 'A'] })).message).toContain('duplicate');
    expect(refusal(() => avro({ type: 'record', name: 'R', fields: [{ name: '1a', type: 'int' }] })).message).toContain('invalid');
    expect(refusal(() => avro({ type: 'fixed', name: 'F' })).message).toContain('size');
  });

  it('falls back to the underlying type for an invalid logical type, as the Avro specification says', () => {
    const s = avro({ type: 'record', name: 'R', fields: [{ name: 'd', type: { type: 'string', logicalType: 'date' } }] });
    expect(s.type === 'AVRO' && s.avro.isValid({ d: 'not a date' })).toBe(true);
  });
});

describe('schema definitions: Protocol Buffers', () => {
  it('accepts proto2, proto3 (with optional, maps, oneofs, nested types) and editions', () => {
    expect(proto('syntax = "proto3"; message ProtocolBuffer { string product_name = 1; int32 SKU = 2; bool in_stock = 3; }').type).toBe(
      'PROTOCOL_BUFFER',
    );
    const nested = proto(`syntax = "proto3";
      package shop.v1;
      option java_package = "com.shop";
      message Order {
        optional string note = 1;
        map<string, int64> tags = 2;
        oneof payment { string card = 3; int32 cash = 4; }
        Line line = 5;
        message Line { string sku = 1; Kind kind = 2; }
        enum Kind { KIND_UNSPECIFIED = 0; BOOK = 1; }
      }`);
    expect(nested.type === 'PROTOCOL_BUFFER' && nested.message.fullName).toBe('.shop.v1.Order');
    expect(proto('syntax = "proto2"; message M { required int32 a = 1; optional group G = 2 { optional int32 b = 3; } }').type).toBe(
      'PROTOCOL_BUFFER',
    );
    expect(proto('edition = "2023"; message UserEvent { string user_id = 1; int64 occurred_at_unix = 3; }').type).toBe('PROTOCOL_BUFFER');
  });

  it('refuses imports (a Pub/Sub schema is one file)', () => {
    const e = refusal(() =>
      proto('syntax = "proto3"; import "google/protobuf/timestamp.proto"; message M { google.protobuf.Timestamp t = 1; }'),
    );
    expect(e.message).toBe(
      'schema.definition: imports are not allowed in a Pub/Sub schema (found import "google/protobuf/timestamp.proto"); define every type in the one definition',
    );
  });

  it('refuses anything but exactly one top-level message', () => {
    expect(refusal(() => proto('syntax = "proto3"; message A { string a = 1; } message B { string b = 1; }')).message).toBe(
      'schema.definition: a Pub/Sub schema must define exactly one top-level type, a message; found 2 (A, B)',
    );
    expect(refusal(() => proto('syntax = "proto3"; message A { E e = 1; } enum E { Z = 0; }')).message).toContain('found 2 (A, E)');
    expect(refusal(() => proto('syntax = "proto3"; enum E { Z = 0; }')).message).toContain('found 1 (E)');
    expect(refusal(() => proto('syntax = "proto3";')).message).toContain('found 0 (none)');
  });

  it('refuses syntax errors, naming the line', () => {
    expect(refusal(() => proto('syntax = "proto3";\nmessage M {\n  string a = 1\n}')).message).toBe(
      "schema.definition: not a valid Protocol Buffer definition: illegal token '}', ';' expected (line 4)",
    );
    expect(refusal(() => proto('message M { string a = 1; }')).message).toContain("illegal token 'string' (line 1)");
  });

  it('refuses references to undefined types, duplicate field numbers, and an open enum not starting at zero', () => {
    expect(refusal(() => proto('syntax = "proto3"; message M { Foo f = 1; }')).message).toContain("no such Type or Enum 'Foo'");
    expect(refusal(() => proto('syntax = "proto3"; message M { string a = 1; string b = 1; }')).message).toContain('duplicate id 1');
    expect(refusal(() => proto('syntax = "proto3"; message M { enum E { A = 1; } E e = 1; }')).message).toBe(
      'schema.definition: the first value of enum M.E must be zero (it is 1)',
    );
    // proto2 enums are closed and may start anywhere.
    expect(proto('syntax = "proto2"; message M { enum E { A = 1; } optional E e = 1; }').type).toBe('PROTOCOL_BUFFER');
  });
});

describe("schema definitions: protoc's rules that a lenient parser lets through", () => {
  const refused = (body: string, syntax = 'proto3') => refusal(() => proto(`syntax = "${syntax}"; message M { ${body} }`)).message;

  it('refuses field numbers protobuf does not allow: 0, 19000 to 19999, beyond 536870911', () => {
    expect(refused('int32 a = 0;')).toBe('schema.definition: field M.a has number 0; field numbers start at 1');
    for (const n of [19000, 19999])
      expect(refused(`int32 a = ${n};`)).toBe(
        `schema.definition: field M.a has number ${n}; numbers 19000 to 19999 are reserved for protobuf itself`,
      );
    expect(refused('message N { int32 b = 536870912; } N n = 1;')).toBe(
      'schema.definition: field M.N.b has number 536870912; field numbers go up to 536870911',
    );
    expect(proto('syntax = "proto3"; message M { int32 a = 18999; int32 b = 20000; int32 c = 536870911; }').type).toBe('PROTOCOL_BUFFER');
  });

  it('refuses a field using a reserved number or name, declared before or after it', () => {
    expect(refused('int32 a = 5; reserved 5;')).toBe('schema.definition: field M.a uses number 5, which message M reserves');
    expect(refused('reserved 5; int32 a = 5;')).toBe('schema.definition: field M.a uses number 5, which message M reserves');
    // protobufjs itself catches this order for a range.
    expect(refused('reserved 2 to 9; int32 a = 5;')).toContain('id 5 is reserved in Type M');
    expect(refused('int32 a = 5; reserved "a";')).toBe('schema.definition: field M.a uses the name a, which message M reserves');
    expect(proto('syntax = "proto3"; message M { reserved 1, 3 to 4; reserved "b"; int32 a = 2; int32 c = 5; }').type).toBe(
      'PROTOCOL_BUFFER',
    );
  });

  it('refuses defaults and extension ranges in proto3; allows them in proto2 where they make sense', () => {
    expect(refused('int32 a = 1 [default = 5];')).toBe(
      'schema.definition: field M.a has a default value; proto3 does not allow default values',
    );
    expect(refused('optional int32 a = 1 [default = 5];')).toContain('proto3 does not allow default values');
    expect(refused('int32 a = 1; extensions 100 to 199;')).toBe(
      'schema.definition: message M declares extensions 100 to 199; proto3 does not allow extension ranges',
    );
    expect(proto('syntax = "proto2"; message M { optional int32 a = 1 [default = 5]; extensions 100 to max; }').type).toBe(
      'PROTOCOL_BUFFER',
    );
    expect(refused('repeated int32 a = 1 [default = 5];', 'proto2')).toBe(
      'schema.definition: field M.a has a default value; a repeated field cannot have one',
    );
    expect(refused('optional int32 a = 1; extensions 100 to 199; extend M { optional int32 e = 200; }', 'proto2')).toBe(
      'schema.definition: extension M.e has number 200, which message M does not declare as an extension number',
    );
    expect(refused('optional int32 a = 150; extensions 100 to 199;', 'proto2')).toBe(
      'schema.definition: field M.a has number 150, inside an extension range of message M',
    );
    expect(proto('syntax = "proto2"; message M { extensions 100 to 199; extend M { optional int32 e = 100; } }').type).toBe(
      'PROTOCOL_BUFFER',
    );
    expect(
      refusal(() => proto('edition = "2023"; message M { int32 a = 1 [default = 5, features.field_presence = IMPLICIT]; }')).message,
    ).toBe('schema.definition: field M.a has a default value; a field with implicit presence cannot have one');
    expect(proto('edition = "2023"; message M { int32 a = 1 [default = 5]; extensions 10 to 20; }').type).toBe('PROTOCOL_BUFFER');
  });

  it('lets a MessageSet (message_set_wire_format) take extension numbers beyond 536870911, as int32s', () => {
    const messageSet = (ranges: string, number: number) =>
      `syntax = "proto2"; message M { option message_set_wire_format = true; extensions ${ranges}; message N { extend M { optional N ext = ${number}; } } }`;
    for (const [ranges, n] of [
      ['4 to max', 1_000_000_000],
      ['4 to max', 2_147_483_646],
      ['4 to 2147483647', 2_147_483_647],
    ] as const)
      expect(proto(messageSet(ranges, n)).type).toBe('PROTOCOL_BUFFER');
    expect(refusal(() => proto(messageSet('4 to 1000', 1_000_000_000))).message).toBe(
      'schema.definition: extension M.N.ext has number 1000000000, which message M does not declare as an extension number',
    );
    // Elsewhere extension ranges, and so extension numbers, stop at 536870911.
    expect(refused('extensions 4 to 1000000000;', 'proto2')).toBe(
      'schema.definition: message M declares extensions up to 1000000000; extension numbers go up to 536870911',
    );
    expect(refused('extensions 4 to max; extend M { optional int32 e = 536870912; }', 'proto2')).toBe(
      'schema.definition: extension M.e has number 536870912, which message M does not declare as an extension number',
    );
  });

  it('refuses two fields with the same JSON name (in proto2 only when both are custom json_names)', () => {
    expect(refused('int32 foo_bar = 1; int32 fooBar = 2;')).toBe(
      'schema.definition: fields M.foo_bar and M.fooBar of message M have the same JSON name "fooBar"',
    );
    expect(refused('int32 a = 1 [json_name = "b"]; int32 b = 2;')).toContain('fields M.a and M.b of message M have the same JSON name "b"');
    expect(refused('optional int32 a = 1 [json_name = "x"]; optional int32 b = 2 [json_name = "x"];', 'proto2')).toBe(
      'schema.definition: fields M.a and M.b of message M have the same JSON name "x"',
    );
    // protoc only warns about a clash in proto2 where one of the names is a default one, and a json_name
    // equal to the field's default name is not custom.
    for (const body of [
      'optional int32 foo_bar = 1; optional int32 fooBar = 2;',
      'optional int32 a = 1 [json_name = "b"]; optional int32 b = 2;',
      'optional int32 foo_bar = 1; optional int32 x = 2 [json_name = "fooBar"];',
      'optional int32 foo_bar = 1 [json_name = "fooBar"]; optional int32 fooBar = 2;',
    ])
      expect(proto(`syntax = "proto2"; message M { ${body} }`).type).toBe('PROTOCOL_BUFFER');
    // A json_name equal to the default name clashes as a default name would, in proto3.
    expect(refused('int32 foo_bar = 1 [json_name = "fooBar"]; int32 fooBar = 2;')).toContain('the same JSON name "fooBar"');
    // deprecated_legacy_json_field_conflicts turns protoc's check off.
    expect(
      proto('syntax = "proto3"; message M { option deprecated_legacy_json_field_conflicts = true; string foo_bar = 1; string fooBar = 2; }')
        .type,
    ).toBe('PROTOCOL_BUFFER');
    expect(refused('message N { option deprecated_legacy_json_field_conflicts = true; } string foo_bar = 1; string fooBar = 2;')).toContain(
      'fields M.foo_bar and M.fooBar of message M have the same JSON name',
    );
    expect(proto('syntax = "proto3"; message M { int32 foo_bar = 1 [json_name = "x"]; int32 fooBar2 = 2; }').type).toBe('PROTOCOL_BUFFER');
  });

  it('refuses an enum value name declared twice in one scope (enum values are siblings of their enum)', () => {
    expect(refused('enum A { X = 0; } enum B { X = 0; }')).toBe(
      'schema.definition: enum value X of enum M.B clashes with enum value X of enum M.A: an enum value is scoped beside its enum, so M.X is already defined',
    );
    expect(refused('int32 X = 1; enum E { X = 0; }')).toContain('enum value X of enum M.E clashes with field M.X');
    expect(refused('message X {} enum E { X = 0; }')).toContain('enum value X of enum M.E clashes with M.X');
    // Enums in different messages are in different scopes.
    expect(proto('syntax = "proto3"; message M { enum A { X = 0; } message N { enum B { X = 0; } } }').type).toBe('PROTOCOL_BUFFER');
  });

  it('refuses an option descriptor.proto does not define, wherever it is', () => {
    expect(refused('int32 a = 1 [foo = true];')).toBe('schema.definition: field M.a has an unknown option foo');
    expect(refused('option bar = 1; int32 a = 1;')).toBe('schema.definition: message M has an unknown option bar');
    expect(refused('enum E { option baz = true; Z = 0; }')).toBe('schema.definition: enum M.E has an unknown option baz');
    expect(refused('enum E { Z = 0 [qux = 1]; }')).toBe('schema.definition: enum value M.E.Z has an unknown option qux');
    expect(refused('oneof o { option q = 1; int32 b = 2; }')).toBe('schema.definition: oneof M.o has an unknown option q');
    expect(refused('int32 a = 1 [(my.opt) = 1];')).toBe(
      'schema.definition: field M.a has an unknown option (my.opt) (a custom option needs an import of its definition, which a schema cannot have)',
    );
    expect(refusal(() => proto('syntax = "proto3"; package p; option zzz = 1; message M { int32 a = 1; }')).message).toBe(
      'schema.definition: the file has an unknown option zzz',
    );
    expect(
      proto(`syntax = "proto3";
        package p;
        option java_package = "com.p";
        option go_package = "p/v1";
        option optimize_for = SPEED;
        message M {
          option deprecated = true;
          repeated int32 a = 1 [packed = false, deprecated = true, json_name = "aa"];
          int64 b = 2 [jstype = JS_STRING];
          enum E { option allow_alias = true; Z = 0; Y = 0 [deprecated = true]; }
        }`).type,
    ).toBe('PROTOCOL_BUFFER');
    expect(
      proto('edition = "2023"; option features.field_presence = IMPLICIT; message M { int32 a = 1 [features.field_presence = EXPLICIT]; }')
        .type,
    ).toBe('PROTOCOL_BUFFER');
  });
});

describe('schema definitions: type and size', () => {
  it('refuses an unknown or missing type, and an empty definition', () => {
    expect(refusal(() => compileSchema('TYPE_UNSPECIFIED', '{}')).message).toBe(
      'schema.type: must be AVRO or PROTOCOL_BUFFER, got "TYPE_UNSPECIFIED"',
    );
    expect(refusal(() => compileSchema(undefined, '{}')).field).toBe('schema.type');
    expect(refusal(() => compileSchema('AVRO', '  ')).message).toBe('schema.definition: a schema definition is required');
    expect(compileSchema(2, '"string"').type).toBe('AVRO');
  });

  it('accepts a definition of 300 KB and refuses one byte more', () => {
    const fields = (pad: number) => JSON.stringify({ type: 'record', name: 'R', doc: 'x'.repeat(pad), fields: [] });
    const base = Buffer.byteLength(fields(0));
    expect(avro(fields(MAX_DEFINITION_BYTES - base)).type).toBe('AVRO');
    expect(refusal(() => avro(fields(MAX_DEFINITION_BYTES - base + 1))).message).toBe(
      'schema.definition: must be at most 300000 bytes, got 300001',
    );
  });
});
