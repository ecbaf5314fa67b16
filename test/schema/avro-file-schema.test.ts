import avsc from 'avsc';
import { once } from 'node:events';
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import {
  avroFileLayout,
  ORDERING_METADATA_FIELDS,
  PUBSUB_METADATA_FIELDS,
  type AvroFileLayout,
  type MessageMetadata,
} from '../../src/schema/avro-file-schema.js';
import { avroType } from '../../src/schema/avro-types.js';
import { decodeMessage } from '../../src/schema/message-validation.js';
import { compileSchema } from '../../src/schema/schema-definition.js';

/** Writes an Avro object container file the way an export would (avsc's block encoder, with the layout's type). */
async function writeFile(layout: AvroFileLayout, records: unknown[]): Promise<Buffer> {
  const encoder = new avsc.streams.BlockEncoder(layout.type, { codec: 'deflate' });
  const chunks: Buffer[] = [];
  encoder.on('data', (c: Buffer) => chunks.push(c));
  const done = once(encoder, 'end');
  for (const r of records) encoder.write(r);
  encoder.end();
  await done;
  return Buffer.concat(chunks);
}

/** Reads a file back with plain avsc: with `readerSchema` given, or with the schema in the file's header. */
async function readFile(file: Buffer, readerSchema?: unknown): Promise<{ header: unknown; records: unknown[] }> {
  const decoder = new avsc.streams.BlockDecoder(readerSchema ? { readerSchema: readerSchema as avsc.Schema } : {});
  let header: unknown;
  decoder.on('metadata', (type: avsc.Type) => (header = type.schema()));
  const records: unknown[] = [];
  decoder.on('data', (r: unknown) => records.push(JSON.parse(JSON.stringify(r))));
  Readable.from([file]).pipe(decoder);
  await once(decoder, 'end');
  return { header, records };
}

const TOPIC_SCHEMA = {
  type: 'record',
  name: 'Order',
  namespace: 'shop',
  fields: [
    { name: 'id', type: 'string' },
    { name: 'qty', type: 'long' },
    { name: 'note', type: ['null', 'string'], default: null },
    { name: 'tags', type: { type: 'array', items: 'string' } },
  ],
};

const meta = (n: number, orderingKey = ''): MessageMetadata => ({
  subscriptionName: 'projects/p/subscriptions/to-gcs',
  messageId: String(n),
  publishTimeMicros: 1_700_000_000_000_000n + BigInt(n),
  attributes: { source: 'test' },
  orderingKey,
  sequence: BigInt(n),
});

describe('Avro files written with the topic schema (avroConfig.useTopicSchema)', () => {
  const schema = compileSchema('AVRO', JSON.stringify(TOPIC_SCHEMA));
  const messages = ['{"id": "a", "qty": 1, "note": {"string": "x"}, "tags": ["t"]}', '{"id": "b", "qty": 2, "note": null, "tags": []}'].map(
    (m) => decodeMessage(schema, 'JSON', Buffer.from(m)),
  );

  it('without metadata: the file schema is the topic schema, and avsc reads the records back with it', async () => {
    const layout = avroFileLayout(schema, false);
    expect(layout.schema).toEqual(TOPIC_SCHEMA);
    const file = await writeFile(
      layout,
      messages.map((m) => layout.record(m)),
    );
    const plainTopicType = avsc.Type.forSchema(TOPIC_SCHEMA as avsc.Schema, { wrapUnions: true });
    const { records } = await readFile(file, plainTopicType);
    expect(records).toEqual([
      { id: 'a', qty: 1, note: { string: 'x' }, tags: ['t'] },
      { id: 'b', qty: 2, note: null, tags: [] },
    ]);
  });

  it('with metadata: the topic fields, then Pub/Sub’s metadata fields (the ordering key among the attributes) and Orderly’s', async () => {
    const layout = avroFileLayout(schema, true);
    const names = (layout.schema as { fields: Array<{ name: string }> }).fields.map((f) => f.name);
    expect(names).toEqual([
      'id',
      'qty',
      'note',
      'tags',
      'subscription_name',
      'message_id',
      'publish_time',
      'attributes',
      'ordering_key',
      'sequence',
    ]);
    const file = await writeFile(layout, [layout.record(messages[0]!, meta(1, 'k1')), layout.record(messages[1]!, meta(2))]);
    const { header, records } = await readFile(file);
    expect((header as { name: string }).name).toBe('shop.Order');
    expect(records[0]).toEqual({
      id: 'a',
      qty: 1,
      note: 'x',
      tags: ['t'],
      subscription_name: 'projects/p/subscriptions/to-gcs',
      message_id: '1',
      publish_time: 1_700_000_000_000_001,
      attributes: { source: 'test', orderingKey: 'k1' },
      ordering_key: 'k1',
      sequence: 1,
    });
    // Readers that know only the topic schema still read the topic's fields (Avro schema resolution).
    const { records: asTopic } = await readFile(file, avsc.Type.forSchema(TOPIC_SCHEMA as avsc.Schema));
    expect(asTopic[1]).toEqual({ id: 'b', qty: 2, note: null, tags: [] });
    expect(() => layout.record(messages[0]!)).toThrow('pass the message metadata');
  });

  it('refuses metadata on a topic schema that is not a record, or has a field named like a metadata field', () => {
    expect(() => avroFileLayout(compileSchema('AVRO', '"string"'), true)).toThrow('needs a topic schema that is a record');
    expect(avroFileLayout(compileSchema('AVRO', '"string"'), false).schema).toBe('string');
    const clash = compileSchema('AVRO', JSON.stringify({ type: 'record', name: 'R', fields: [{ name: 'message_id', type: 'string' }] }));
    expect(() => avroFileLayout(clash, true)).toThrow(
      "the topic schema's field message_id has the name of a metadata field that avroConfig.writeMetadata adds",
    );
  });

  it('a recursive record: the top-level record (renamed) has the metadata fields, its nested self is the topic record', async () => {
    const node = {
      type: 'record',
      name: 'Node',
      namespace: 'list',
      fields: [
        { name: 'v', type: 'int' },
        { name: 'next', type: ['null', 'Node'], default: null },
      ],
    };
    const recursive = compileSchema('AVRO', JSON.stringify(node));
    const layout = avroFileLayout(recursive, true);
    const header = layout.schema as { name: string; fields: Array<{ name: string; type: unknown }> };
    expect(header.name).toBe('list.NodeWithMetadata');
    expect(header.fields.map((f) => f.name)).toEqual([
      'v',
      'next',
      'subscription_name',
      'message_id',
      'publish_time',
      'attributes',
      'ordering_key',
      'sequence',
    ]);
    expect(header.fields[1]!.type).toEqual([
      'null',
      { ...node, name: 'list.Node', namespace: undefined, fields: [node.fields[0], { ...node.fields[1], type: ['null', 'list.Node'] }] },
    ]);
    const decoded = decodeMessage(recursive, 'JSON', Buffer.from('{"v": 1, "next": {"list.Node": {"v": 2, "next": null}}}'));
    const file = await writeFile(layout, [layout.record(decoded, meta(1))]);
    const { records } = await readFile(file);
    expect(records[0]).toMatchObject({ v: 1, next: { v: 2, next: null }, message_id: '1', sequence: 1 });
    // A reader with the topic schema reads the file too, once it accepts the top-level record's name.
    const { records: asTopic } = await readFile(file, avsc.Type.forSchema({ ...node, aliases: ['NodeWithMetadata'] } as avsc.Schema));
    expect(asTopic[0]).toEqual({ v: 1, next: { v: 2, next: null } });
  });

  // Two compatible revisions of one schema: the newer adds an optional self-reference (default null), so
  // its top-level record is renamed. A file laid out by either takes the other's messages by resolution.
  describe('revisions of which one is recursive', () => {
    const v1 = compileSchema(
      'AVRO',
      JSON.stringify({ type: 'record', name: 'Node', namespace: 'list', fields: [{ name: 'v', type: 'int' }] }),
    );
    const v2 = compileSchema(
      'AVRO',
      JSON.stringify({
        type: 'record',
        name: 'Node',
        namespace: 'list',
        fields: [
          { name: 'v', type: 'int' },
          { name: 'next', type: ['null', 'Node'], default: null },
        ],
      }),
    );
    const resolve = (reader: AvroFileLayout, writer: AvroFileLayout, record: unknown) =>
      JSON.parse(
        JSON.stringify(reader.type.fromBuffer(writer.type.toBuffer(record), reader.type.createResolver(writer.type)), (_, v: unknown) =>
          typeof v === 'bigint' ? Number(v) : v,
        ),
      ) as unknown;

    it('a recursive layout reads a non-recursive one, and the reverse', () => {
      const [recursive, plain] = [avroFileLayout(v2, true), avroFileLayout(v1, true)];
      const fromPlain = plain.record(decodeMessage(v1, 'JSON', Buffer.from('{"v": 1}')), meta(1));
      expect(resolve(recursive, plain, fromPlain)).toMatchObject({ v: 1, next: null, message_id: '1' });
      const fromRecursive = recursive.record(
        decodeMessage(v2, 'JSON', Buffer.from('{"v": 2, "next": {"list.Node": {"v": 3, "next": null}}}')),
        meta(2),
      );
      const read = resolve(plain, recursive, fromRecursive);
      expect(read).toMatchObject({ v: 2, message_id: '2', sequence: 2 });
      expect(read).not.toHaveProperty('next');
    });

    it("each top-level record names the other revision's as an alias, after the topic record's own", () => {
      const aliased = compileSchema(
        'AVRO',
        JSON.stringify({ type: 'record', name: 'Node', namespace: 'list', aliases: ['Old'], fields: [{ name: 'v', type: 'int' }] }),
      );
      expect((avroFileLayout(v2, true).schema as { aliases?: string[] }).aliases).toEqual(['list.Node']);
      expect((avroFileLayout(v1, true).schema as { aliases?: string[] }).aliases).toEqual(['list.NodeWithMetadata']);
      // The definition's own alias as it wrote it (in its namespace: list.Old).
      expect((avroFileLayout(aliased, true).schema as { aliases?: string[] }).aliases).toEqual(['Old', 'list.NodeWithMetadata']);
      // Without metadata fields the record is the topic's own, unrenamed, and gets no alias.
      expect((avroFileLayout(v1, false).schema as { aliases?: string[] }).aliases).toBeUndefined();
    });

    it('a file written before the aliases (none in its header) reads the same, and resolves as a writer', async () => {
      const layout = avroFileLayout(v2, true);
      const record = layout.record(decodeMessage(v2, 'JSON', Buffer.from('{"v": 1, "next": null}')), meta(1));
      const before = { ...(layout.schema as object), aliases: undefined } as unknown as avsc.Schema;
      const old = { ...layout, type: avroType(before) };
      expect((await readFile(await writeFile(old, [record]))).records).toEqual((await readFile(await writeFile(layout, [record]))).records);
      // Resolution takes the reader's aliases only: the writer's own (or their absence) change nothing.
      expect(resolve(avroFileLayout(v1, true), old, record)).toMatchObject({ v: 1, message_id: '1' });
    });
  });

  it('refuses a recursive record whose renamed top-level record would take a name the schema already has', () => {
    const taken = compileSchema(
      'AVRO',
      JSON.stringify({
        type: 'record',
        name: 'Node',
        fields: [
          { name: 'next', type: ['null', 'Node'], default: null },
          { name: 'other', type: { type: 'record', name: 'NodeWithMetadata', fields: [] } },
        ],
      }),
    );
    expect(() => avroFileLayout(taken, true)).toThrow('NodeWithMetadata is taken');
  });

  it("keeps in the header what the topic schema says and avsc's export drops: an enum's default, unknown logical types, properties", () => {
    const topic = {
      type: 'record',
      name: 'Reading',
      namespace: 'iot',
      doc: 'one reading',
      'connect.name': 'iot.Reading',
      fields: [
        { name: 'at', type: { type: 'long', logicalType: 'timestamp-nanos' } },
        { name: 'level', type: { type: 'enum', name: 'Level', symbols: ['UNKNOWN', 'LOW', 'HIGH'], default: 'UNKNOWN' } },
        { name: 'unit', type: { type: 'string', 'avro.java.string': 'String' } },
      ],
    };
    const compiled = compileSchema('AVRO', JSON.stringify(topic));
    for (const writeMetadata of [false, true]) {
      const layout = avroFileLayout(compiled, writeMetadata);
      const fields = writeMetadata ? [...topic.fields, ...PUBSUB_METADATA_FIELDS, ...ORDERING_METADATA_FIELDS] : topic.fields;
      expect(layout.schema).toEqual({ ...topic, ...(writeMetadata ? { aliases: ['iot.ReadingWithMetadata'] } : {}), fields });
      // The header describes the records the layout's type writes (the same canonical form).
      expect(avsc.Type.forSchema(JSON.parse(layout.schemaText) as avsc.Schema).fingerprint()).toEqual(layout.type.fingerprint());
    }
  });

  it('writes a long default beyond 2^53 exactly in the header schema, with and without metadata', () => {
    const big = compileSchema(
      'AVRO',
      '{"type": "record", "name": "R", "fields": [{"name": "n", "type": "long", "default": 9007199254740993}]}',
    );
    for (const writeMetadata of [false, true]) {
      const layout = avroFileLayout(big, writeMetadata);
      expect(layout.schemaText).toMatch(/"default": ?9007199254740993\b/);
      expect((layout.schema as { fields: Array<{ default?: unknown }> }).fields[0]!.default).toBe(9007199254740993n);
    }
  });
});

describe('Avro files for a Protocol Buffer topic schema', () => {
  const schema = compileSchema(
    'PROTOCOL_BUFFER',
    `syntax = "proto3";
    package shop;
    message Order {
      string id = 1; uint64 big = 2; uint32 u = 3; optional int32 maybe = 4; Status status = 5;
      enum Status { NEW = 0; PAID = 1; }
      message Line { string sku = 1; Line parent = 2; }
      repeated Line lines = 6; map<string, int64> totals = 7; map<int32, string> names = 8; bytes raw = 9; float f = 10;
    }`,
  );
  const message = decodeMessage(
    schema,
    'JSON',
    Buffer.from(
      JSON.stringify({
        id: 'o1',
        big: '18446744073709551615',
        u: 4294967295,
        maybe: 3,
        status: 'PAID',
        lines: [{ sku: 'a', parent: { sku: 'root' } }],
        totals: { eur: '12' },
        names: { '7': 'seven' },
        raw: 'AQI=',
        f: 0.5,
      }),
    ),
  );

  it('a message named like an Avro primitive type (outside a package) is a record named with a trailing _', async () => {
    const named = compileSchema('PROTOCOL_BUFFER', 'syntax = "proto3"; message long { int32 x = 1; string s = 2; }');
    const layout = avroFileLayout(named, false);
    expect((layout.schema as { name: string }).name).toBe('long_');
    const { records } = await readFile(
      await writeFile(layout, [layout.record(decodeMessage(named, 'JSON', Buffer.from('{"x": 7}')), meta(1, ''))]),
    );
    expect(records).toEqual([{ x: 7, s: '' }]);
  });

  it('a recursive message with metadata: only the top-level record has the metadata fields', async () => {
    const tree = compileSchema('PROTOCOL_BUFFER', 'syntax = "proto3"; message A { int32 x = 1; repeated A kids = 9; }');
    const layout = avroFileLayout(tree, true);
    const header = layout.schema as { name: string; fields: Array<{ name: string; type: unknown }> };
    expect(header.name).toBe('AWithMetadata');
    expect(header.fields.find((f) => f.name === 'kids')!.type).toEqual({
      type: 'array',
      items: {
        name: 'A',
        type: 'record',
        fields: [
          { name: 'x', type: 'int' },
          { name: 'kids', type: { type: 'array', items: 'A' } },
        ],
      },
    });
    const decoded = decodeMessage(tree, 'JSON', Buffer.from('{"x": 1, "kids": [{"x": 2, "kids": [{"x": 3}]}]}'));
    const { records } = await readFile(await writeFile(layout, [layout.record(decoded, meta(4, 'k'))]));
    expect(records[0]).toMatchObject({ x: 1, kids: [{ x: 2, kids: [{ x: 3, kids: [] }] }], ordering_key: 'k', sequence: 4 });
  });

  it('describes the message as an Avro record that avsc writes and reads back from the file header alone', async () => {
    const layout = avroFileLayout(schema, false);
    expect(layout.schema).toMatchObject({ type: 'record', name: 'shop.Order' });
    const fields = Object.fromEntries(
      (layout.schema as { fields: Array<{ name: string; type: unknown }> }).fields.map((f) => [f.name, f.type]),
    );
    expect(fields).toMatchObject({
      id: 'string',
      big: { type: 'bytes', logicalType: 'decimal', precision: 20, scale: 0 },
      u: 'long',
      maybe: ['null', 'int'],
      status: 'int',
      totals: { type: 'map', values: 'long' },
      names: { type: 'array', items: { type: 'record', name: 'shop.Order.NamesEntry' } },
      raw: 'bytes',
      f: 'float',
    });
    const file = await writeFile(layout, [layout.record(message)]);
    const { records } = await readFile(file);
    expect(records[0]).toEqual({
      id: 'o1',
      // decimal(20, 0) bytes of 2^64 - 1, as JSON.stringify renders a Buffer
      big: { type: 'Buffer', data: [0, 255, 255, 255, 255, 255, 255, 255, 255] },
      u: 4294967295,
      maybe: 3,
      status: 1,
      lines: [{ sku: 'a', parent: { sku: 'root', parent: null } }],
      totals: { eur: 12 },
      names: [{ key: 7, value: 'seven' }],
      raw: { type: 'Buffer', data: [1, 2] },
      f: 0.5,
    });
  });
});
