import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeMessage, type DecodedMessage } from '../../src/schema/message-validation.js';
import { compileSchema, type CompiledSchema } from '../../src/schema/schema-definition.js';
import { ColumnValueError, columnDefinitionsSql, mapSchemaToTable, UnmappableSchemaError } from '../../src/schema/type-mapping.js';

let instance: DuckDBInstance;
let db: DuckDBConnection;

beforeAll(async () => {
  instance = await DuckDBInstance.create(':memory:');
  db = await instance.connect();
});

afterAll(() => {
  db.closeSync();
  instance.closeSync();
});

/** Creates `table` from the mapping, appends the messages with DuckDB's appender, reads every column back as text. */
async function roundTrip(table: string, schema: CompiledSchema, messages: DecodedMessage[]) {
  const mapping = mapSchemaToTable(schema);
  await db.run(`CREATE TABLE ${table} (${columnDefinitionsSql(mapping.columns)})`);
  const info = await db.runAndReadAll(
    `SELECT column_name, data_type, is_nullable FROM information_schema.columns WHERE table_name = '${table}' ORDER BY ordinal_position`,
  );
  const appender = await db.createAppender(table);
  for (const m of messages) {
    mapping.row(m).forEach((v, i) => appender.appendValue(v, appender.columnType(i)));
    appender.endRow();
  }
  appender.flushSync();
  appender.closeSync();
  const casts = mapping.columns.map((c) => `"${c.name}"::VARCHAR AS "${c.name}"`).join(', ');
  // Rows as arrays, then objects with own keys (DuckDB's row objects would lose a column named "__proto__").
  const names = mapping.columns.map((c) => c.name);
  const rows = (await db.runAndReadAll(`SELECT ${casts} FROM ${table} ORDER BY rowid`))
    .getRowsJson()
    .map((r) => Object.fromEntries(names.map((n, i) => [n, r[i]])));
  return { columns: mapping.columns, table: info.getRowObjectsJson(), rows };
}

const AVRO_ALL = {
  type: 'record',
  name: 'All',
  fields: [
    { name: 'b', type: 'boolean' },
    { name: 'i', type: 'int' },
    { name: 'l', type: 'long' },
    { name: 'f', type: 'float' },
    { name: 'd', type: 'double' },
    { name: 'by', type: 'bytes' },
    { name: 's', type: 'string' },
    {
      name: 'rec',
      type: {
        type: 'record',
        name: 'Inner',
        fields: [
          { name: 'x', type: ['null', 'string'] },
          { name: 'y', type: 'int' },
        ],
      },
    },
    { name: 'e', type: { type: 'enum', name: 'Color', symbols: ['RED', 'GREEN'] } },
    { name: 'arr', type: { type: 'array', items: 'long' } },
    { name: 'm', type: { type: 'map', values: ['null', 'int'] } },
    { name: 'fx', type: { type: 'fixed', name: 'Two', size: 2 } },
    { name: 'opt', type: ['null', 'string'] },
    { name: 'opt2', type: ['double', 'null'] },
    { name: 'nothing', type: 'null' },
    { name: 'dt', type: { type: 'int', logicalType: 'date' } },
    { name: 'tms', type: { type: 'int', logicalType: 'time-millis' } },
    { name: 'tus', type: { type: 'long', logicalType: 'time-micros' } },
    { name: 'tsms', type: { type: 'long', logicalType: 'timestamp-millis' } },
    { name: 'tsus', type: { type: 'long', logicalType: 'timestamp-micros' } },
    { name: 'dec', type: { type: 'bytes', logicalType: 'decimal', precision: 20, scale: 4 } },
    { name: 'decfx', type: { type: 'fixed', name: 'Dec8', size: 8, logicalType: 'decimal', precision: 18, scale: 2 } },
    { name: 'wide', type: { type: 'bytes', logicalType: 'decimal', precision: 40, scale: 3 } },
    { name: 'dur', type: { type: 'fixed', name: 'Dur', size: 12, logicalType: 'duration' } },
    { name: 'id', type: { type: 'string', logicalType: 'uuid' } },
    { name: 'local', type: { type: 'long', logicalType: 'local-timestamp-micros' } },
  ],
};

describe('Avro -> DuckDB columns (every type in docs/schemas.md)', () => {
  const schema = compileSchema('AVRO', JSON.stringify(AVRO_ALL));
  const full = `{
    "b": true, "i": -2147483648, "l": 9223372036854775807, "f": 0.5, "d": -1.25e300, "by": "\\u0000\\u00ff", "s": "héllo",
    "rec": {"x": {"string": "in"}, "y": 7}, "e": "GREEN", "arr": [9007199254740993, -1], "m": {"k": {"int": 1}, "z": null},
    "fx": "ab", "opt": {"string": "here"}, "opt2": {"double": 2.5}, "nothing": null, "dt": 19723, "tms": 45296789, "tus": 45296789012,
    "tsms": 1700000000123, "tsus": 1700000000123456, "dec": "\\u00ff\\u0000", "decfx": "\\u0000\\u0000\\u0000\\u0000\\u0000\\u0000\\u0004\\u00d2",
    "wide": "\\u0012\\u0034\\u0056\\u0078\\u009a\\u00bc\\u00de\\u00f0\\u0012\\u0034\\u0056\\u0078\\u009a\\u00bc\\u00de\\u00f0\\u0001",
    "dur": "\\u0001\\u0000\\u0000\\u0000\\u0002\\u0000\\u0000\\u0000\\u00e8\\u0003\\u0000\\u0000",
    "id": "0b4f7c1e-6a2d-4f6b-9c1d-2a3b4c5d6e7f", "local": 5
  }`;
  const nulls = full.replace('{"string": "here"}', 'null').replace('{"double": 2.5}', 'null').replace('{"string": "in"}', 'null');

  it('maps each Avro type and logical type to its DuckDB column type, nullable exactly for [null, T]', async () => {
    const { columns, table } = await roundTrip('avro_types', schema, []);
    const expected: Array<[string, string, boolean]> = [
      ['b', 'BOOLEAN', false],
      ['i', 'INTEGER', false],
      ['l', 'BIGINT', false],
      ['f', 'DOUBLE', false],
      ['d', 'DOUBLE', false],
      ['by', 'BLOB', false],
      ['s', 'VARCHAR', false],
      ['rec', 'STRUCT("x" VARCHAR, "y" INTEGER)', false],
      ['e', 'VARCHAR', false],
      ['arr', 'BIGINT[]', false],
      ['m', 'MAP(VARCHAR, INTEGER)', false],
      ['fx', 'BLOB', false],
      ['opt', 'VARCHAR', true],
      ['opt2', 'DOUBLE', true],
      ['nothing', 'VARCHAR', true],
      ['dt', 'DATE', false],
      ['tms', 'TIME', false],
      ['tus', 'TIME', false],
      ['tsms', 'TIMESTAMPTZ', false],
      ['tsus', 'TIMESTAMPTZ', false],
      ['dec', 'DECIMAL(20,4)', false],
      ['decfx', 'DECIMAL(18,2)', false],
      ['wide', 'VARCHAR', false],
      ['dur', 'INTERVAL', false],
      ['id', 'VARCHAR', false],
      ['local', 'BIGINT', false],
    ];
    expect(columns.map((c) => [c.name, c.duckdbType, c.nullable])).toEqual(expected);
    // DuckDB's own reading of the created table agrees.
    expect(table.map((c) => [c.column_name, c.is_nullable])).toEqual(expected.map(([n, , nullable]) => [n, nullable ? 'YES' : 'NO']));
    expect(table.find((c) => c.column_name === 'tsus')!.data_type).toBe('TIMESTAMP WITH TIME ZONE');
    expect(table.find((c) => c.column_name === 'rec')!.data_type).toBe('STRUCT(x VARCHAR, y INTEGER)');
  });

  it('writes decoded values that DuckDB stores and reads back exactly', async () => {
    const { rows } = await roundTrip('avro_values', schema, [
      decodeMessage(schema, 'JSON', Buffer.from(full)),
      decodeMessage(schema, 'JSON', Buffer.from(nulls)),
    ]);
    expect(rows[0]).toEqual({
      b: 'true',
      i: '-2147483648',
      l: '9223372036854775807',
      f: '0.5',
      d: '-1.25e+300',
      by: '\\x00\\xFF',
      s: 'héllo',
      rec: "{'x': in, 'y': 7}",
      e: 'GREEN',
      arr: '[9007199254740993, -1]',
      m: '{k=1, z=NULL}',
      fx: 'ab',
      opt: 'here',
      opt2: '2.5',
      nothing: null,
      dt: '2024-01-01',
      tms: '12:34:56.789',
      tus: '12:34:56.789012',
      tsms: '2023-11-14 22:13:20.123+00',
      tsus: '2023-11-14 22:13:20.123456+00',
      dec: '-0.0256',
      decfx: '12.34',
      wide: '6194651444036284125387089323649266544.641',
      dur: '1 month 2 days 00:00:01',
      id: '0b4f7c1e-6a2d-4f6b-9c1d-2a3b4c5d6e7f',
      local: '5',
    });
    expect(rows[1]).toMatchObject({ opt: null, opt2: null, rec: "{'x': NULL, 'y': 7}" });
  });

  it('the same row from the binary encoding', async () => {
    const binary = (compileSchema('AVRO', JSON.stringify(AVRO_ALL)) as { avro: { toBuffer(v: unknown): Buffer } }).avro.toBuffer(
      decodeMessage(schema, 'JSON', Buffer.from(full)).value,
    );
    const fromJson = mapSchemaToTable(schema).row(decodeMessage(schema, 'JSON', Buffer.from(full)));
    expect(mapSchemaToTable(schema).row(decodeMessage(schema, 'BINARY', binary))).toEqual(fromJson);
  });

  it('keeps a field named __proto__ (a valid Avro name) as a column and a STRUCT field', async () => {
    const odd = compileSchema(
      'AVRO',
      JSON.stringify({
        type: 'record',
        name: 'P',
        fields: [{ name: '__proto__', type: { type: 'record', name: 'I', fields: [{ name: '__proto__', type: 'int' }] } }],
      }),
    );
    const { rows } = await roundTrip('avro_proto_names', odd, [decodeMessage(odd, 'JSON', Buffer.from('{"__proto__": {"__proto__": 5}}'))]);
    expect(Object.entries(rows[0]!)).toEqual([['__proto__', "{'__proto__': 5}"]]);
  });

  it('fails one message whose value does not fit its column', () => {
    const tight = compileSchema(
      'AVRO',
      JSON.stringify({
        type: 'record',
        name: 'T',
        fields: [
          { name: 'dec', type: { type: 'bytes', logicalType: 'decimal', precision: 3, scale: 1 } },
          { name: 't', type: { type: 'long', logicalType: 'time-micros' } },
          { name: 'ms', type: { type: 'long', logicalType: 'timestamp-millis' }, default: 0 },
        ],
      }),
    );
    const mapping = mapSchemaToTable(tight);
    const row = (json: string) => mapping.row(decodeMessage(tight, 'JSON', Buffer.from(json)));
    expect(() => row('{"dec": "\\u0003\\u00e8", "t": 0, "ms": 0}')).toThrow(
      new ColumnValueError('dec', 'decimal 100.0 has more than the 3 digits of its type'),
    );
    expect(() => row('{"dec": "\\u0001", "t": 86400000001, "ms": 0}')).toThrow(
      new ColumnValueError('t', '86400000001 microseconds is not a time of day (0 to 24:00:00)'),
    );
    // A long the schema allows, in milliseconds, is past any TIMESTAMPTZ: the message fails, not the batch.
    expect(() => row('{"dec": "\\u0001", "t": 0, "ms": 9223372036854775807}')).toThrow(
      new ColumnValueError('ms', 'timestamp of 9223372036854775807000 microseconds since 1970 is out of range for a TIMESTAMPTZ column'),
    );
    expect(row('{"dec": "\\u0003\\u00e7", "t": 86400000000, "ms": 0}')).toHaveLength(3);
  });

  it('refuses what BigQuery cannot map: other unions, a non-record schema, a recursive record; and names DuckDB would merge', () => {
    const unmappable = (schema: unknown) => () => mapSchemaToTable(compileSchema('AVRO', JSON.stringify(schema)));
    expect(unmappable({ type: 'record', name: 'U', fields: [{ name: 'v', type: ['int', 'string'] }] })).toThrow(
      new UnmappableSchemaError('v', 'a union maps to a column only as [null, T]; this one is [int, string]'),
    );
    expect(unmappable({ type: 'record', name: 'U', fields: [{ name: 'v', type: ['null', 'int', 'string'] }] })).toThrow(
      UnmappableSchemaError,
    );
    expect(unmappable({ type: 'array', items: 'int' })).toThrow('an Avro schema maps to columns only when it is a record, not array');
    expect(unmappable({ type: 'record', name: 'Node', fields: [{ name: 'next', type: ['null', 'Node'] }] })).toThrow(
      'the topic schema cannot be mapped to table columns at next: record Node contains itself; a column type cannot nest without end',
    );
    expect(
      unmappable({
        type: 'record',
        name: 'C',
        fields: [
          { name: 'id', type: 'int' },
          { name: 'ID', type: 'int' },
        ],
      }),
    ).toThrow('fields "id" and "ID" differ only in case');
    expect(new UnmappableSchemaError('v', 'x').code).toBe('FAILED_PRECONDITION');
  });
});

const PROTO_ALL = `syntax = "proto3";
message All {
  double d = 1; float f = 2; int32 i32 = 3; int64 i64 = 4; uint32 u32 = 5; uint64 u64 = 6; sint32 s32 = 7; sint64 s64 = 8;
  fixed32 f32 = 9; fixed64 f64 = 10; sfixed32 sf32 = 11; sfixed64 sf64 = 12; bool b = 13; string s = 14; bytes by = 15;
  enum Kind { KIND_UNSPECIFIED = 0; BIG = 2; }
  Kind kind = 16;
  message Inner { string name = 1; repeated int32 nums = 2; }
  Inner inner = 17;
  repeated string tags = 18;
  map<int64, Inner> by_id = 19;
  optional string note = 20;
  repeated Inner inners = 21;
}`;

describe('Protocol Buffers -> DuckDB columns (every type in docs/schemas.md)', () => {
  const schema = compileSchema('PROTOCOL_BUFFER', PROTO_ALL);
  const message = {
    d: 1.5,
    f: 0.25,
    i32: -5,
    i64: '-9223372036854775808',
    u32: 4294967295,
    u64: '18446744073709551615',
    s32: -7,
    s64: '-9007199254740993',
    f32: 4000000000,
    f64: '9007199254740993',
    sf32: -1,
    sf64: '42',
    b: true,
    s: 'ok',
    by: 'AP8=',
    kind: 'BIG',
    inner: { name: 'n', nums: [1, 2] },
    tags: ['a', 'b'],
    byId: { '-3': { name: 'x' } },
    note: 'hi',
    inners: [{ name: 'p' }],
  };

  it('maps each protobuf type to its DuckDB column type; presence makes a column nullable', async () => {
    const { columns } = await roundTrip('proto_types', schema, []);
    expect(columns.map((c) => [c.name, c.duckdbType, c.nullable])).toEqual([
      ['d', 'DOUBLE', false],
      ['f', 'DOUBLE', false],
      ['i32', 'INTEGER', false],
      ['i64', 'BIGINT', false],
      ['u32', 'UINTEGER', false],
      ['u64', 'UBIGINT', false],
      ['s32', 'INTEGER', false],
      ['s64', 'BIGINT', false],
      ['f32', 'UINTEGER', false],
      ['f64', 'UBIGINT', false],
      ['sf32', 'INTEGER', false],
      ['sf64', 'BIGINT', false],
      ['b', 'BOOLEAN', false],
      ['s', 'VARCHAR', false],
      ['by', 'BLOB', false],
      ['kind', 'INTEGER', false],
      ['inner', 'STRUCT("name" VARCHAR, "nums" INTEGER[])', true],
      ['tags', 'VARCHAR[]', false],
      ['by_id', 'MAP(BIGINT, STRUCT("name" VARCHAR, "nums" INTEGER[]))', false],
      ['note', 'VARCHAR', true],
      ['inners', 'STRUCT("name" VARCHAR, "nums" INTEGER[])[]', false],
    ]);
  });

  it('writes decoded values that DuckDB stores and reads back exactly (JSON and wire format alike)', async () => {
    const json = decodeMessage(schema, 'JSON', Buffer.from(JSON.stringify(message)));
    const M = (schema as { message: { encode(m: unknown): { finish(): Uint8Array }; fromObject(o: unknown): unknown } }).message;
    const wire = decodeMessage(
      schema,
      'BINARY',
      Buffer.from(M.encode(M.fromObject({ ...message, by: Buffer.from([0, 255]), kind: 2, by_id: message.byId })).finish()),
    );
    const empty = decodeMessage(schema, 'BINARY', Buffer.alloc(0));
    const { rows } = await roundTrip('proto_values', schema, [json, wire, empty]);
    const expected = {
      d: '1.5',
      f: '0.25',
      i32: '-5',
      i64: '-9223372036854775808',
      u32: '4294967295',
      u64: '18446744073709551615',
      s32: '-7',
      s64: '-9007199254740993',
      f32: '4000000000',
      f64: '9007199254740993',
      sf32: '-1',
      sf64: '42',
      b: 'true',
      s: 'ok',
      by: '\\x00\\xFF',
      kind: '2',
      inner: "{'name': n, 'nums': [1, 2]}",
      tags: '[a, b]',
      by_id: "{-3={'name': x, 'nums': []}}",
      note: 'hi',
      inners: "[{'name': p, 'nums': []}]",
    };
    expect(rows[0]).toEqual(expected);
    expect(rows[1]).toEqual(expected);
    expect(rows[2]).toEqual({
      d: '0.0',
      f: '0.0',
      i32: '0',
      i64: '0',
      u32: '0',
      u64: '0',
      s32: '0',
      s64: '0',
      f32: '0',
      f64: '0',
      sf32: '0',
      sf64: '0',
      b: 'false',
      s: '',
      by: '',
      kind: '0',
      inner: null,
      tags: '[]',
      by_id: '{}',
      note: null,
      inners: '[]',
    });
  });

  it('maps proto3 `optional` fields (not a oneof for this purpose) and proto2 required ones as NOT NULL', () => {
    const p2 = compileSchema(
      'PROTOCOL_BUFFER',
      'syntax = "proto2"; message M { required int32 r = 1; optional int32 o = 2; repeated int32 x = 3; }',
    );
    expect(mapSchemaToTable(p2).columns.map((c) => [c.name, c.nullable])).toEqual([
      ['r', false],
      ['o', true],
      ['x', false],
    ]);
  });

  it('refuses what BigQuery cannot map: a oneof, a recursive message', () => {
    const unmappable = (definition: string) => () => mapSchemaToTable(compileSchema('PROTOCOL_BUFFER', definition));
    expect(unmappable('syntax = "proto3"; message M { oneof v { string a = 1; int32 b = 2; } }')).toThrow(
      'the topic schema cannot be mapped to table columns at a: field a belongs to oneof v; BigQuery cannot map a oneof, and neither can Orderly',
    );
    expect(unmappable('syntax = "proto3"; message Node { string v = 1; Node next = 2; }')).toThrow('at next: message Node contains itself');
  });
});
