import avro from 'avsc';
import { Readable } from 'node:stream';
import { once } from 'node:events';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseObjectStorageConfig } from '../../connectors/object-storage/config.js';
import { ObjectStorageWriter } from '../../connectors/object-storage/object-writer.js';
import { readRecords } from '../../connectors/object-storage/record-format.js';
import { queryDuckDb } from '../../src/duckdb/database.js';
import { tempDir } from '../helpers/temp-dir.js';
import { openExport } from '../helpers/export.js';
import { waitFor } from '../helpers/wait-for.js';
import { startTestS3, type TestS3 } from '../helpers/s3.js';
import { writerContext } from '../helpers/writer-context.js';

/**
 * Exports that write with the topic's schema (issue #13): bigqueryConfig.useTopicSchema fills the DuckDB
 * columns docs/schemas.md maps the schema's fields to; cloudStorageConfig.avroConfig.useTopicSchema writes
 * Avro files whose schema is the topic's, which avsc reads back on its own.
 */
const ORDER_V1 = {
  type: 'record',
  name: 'Order',
  namespace: 'shop',
  fields: [
    { name: 'id', type: 'string' },
    { name: 'qty', type: 'int' },
    { name: 'total', type: { type: 'bytes', logicalType: 'decimal', precision: 10, scale: 2 } },
    { name: 'placed', type: { type: 'long', logicalType: 'timestamp-micros' } },
    { name: 'note', type: ['null', 'string'] },
    { name: 'tags', type: { type: 'array', items: 'string' } },
    { name: 'status', type: { type: 'enum', name: 'Status', symbols: ['NEW', 'PAID'] } },
  ],
};
/** A compatible revision: a field with a default added. */
const ORDER_V2 = { ...ORDER_V1, fields: [...ORDER_V1.fields, { name: 'channel', type: 'string', default: 'web' }] };
/** A record with nested records (also in an array and a map), and a revision that adds a field to each. */
const STOP = { type: 'record', name: 'Stop', fields: [{ name: 'city', type: 'string' }] };
const SHIPMENT_V1 = {
  type: 'record',
  name: 'Shipment',
  namespace: 'shop',
  fields: [
    { name: 'id', type: 'string' },
    { name: 'dest', type: { type: 'record', name: 'Address', fields: [{ name: 'street', type: 'string' }] } },
    { name: 'stops', type: { type: 'array', items: STOP } },
    { name: 'codes', type: { type: 'map', values: 'shop.Stop' } },
  ],
};
const SHIPMENT_V2 = {
  ...SHIPMENT_V1,
  fields: [
    SHIPMENT_V1.fields[0],
    {
      name: 'dest',
      type: {
        type: 'record',
        name: 'Address',
        fields: [
          { name: 'street', type: 'string' },
          { name: 'zip', type: ['null', 'string'], default: null },
        ],
      },
    },
    { name: 'stops', type: { type: 'array', items: { ...STOP, fields: [...STOP.fields, { name: 'eta', type: 'long', default: 0 }] } } },
    SHIPMENT_V1.fields[3],
  ],
};
const shipmentV1 = (id: string) =>
  JSON.stringify({ id, dest: { street: `${id} St` }, stops: [{ city: 'Oslo' }], codes: { x: { city: 'Oslo' } } });
/** The map's values are the revised Stop too. */
const shipmentV2 = (id: string) =>
  JSON.stringify({
    id,
    dest: { street: `${id} St`, zip: { string: '0150' } },
    stops: [{ city: 'Rome', eta: 5 }],
    codes: { x: { city: 'Oslo', eta: 7 } },
  });

const PLACED = Date.UTC(2024, 4, 1, 12, 0, 0) * 1000;

const order = (id: string, qty: number, extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    id,
    qty,
    total: '\u0004\u00d2',
    placed: PLACED,
    note: qty % 2 ? null : { string: `n${qty}` },
    tags: [id],
    status: 'PAID',
    ...extra,
  });

let dir: ReturnType<typeof tempDir>;
let env: Awaited<ReturnType<typeof openExport>>;
let s3: TestS3;

beforeAll(async () => {
  s3 = await startTestS3();
});
afterAll(async () => s3.close());

beforeEach(async () => {
  dir = tempDir();
  env = await openExport(dir.path, { objectStorage: s3.settings });
  await env.core.schemas.create({
    parent: 'projects/p',
    schemaId: 'order',
    schema: { type: 'AVRO', definition: JSON.stringify(ORDER_V1) },
  });
  await env.core.createTopic('orders', { schemaSettings: { schema: 'projects/p/schemas/order', encoding: 'JSON' } });
});
afterEach(async () => {
  await env.close();
  dir.remove();
});

const sql = (q: string) => queryDuckDb(env.duckdbPath, q);

/** The object writer driven directly, so which messages share a file does not depend on timing. */
async function openAvroWriter(bucket: string, avroConfig: Record<string, unknown>): Promise<ObjectStorageWriter> {
  const config = parseObjectStorageConfig({ bucket, filenameDatetimeFormat: 'YYYY-MM-DDThh:mm:ssZ', avroConfig });
  const writer = new ObjectStorageWriter(
    config,
    writerContext(
      'files',
      { dataDir: dir.path, objectStorage: s3.settings },
      { spec: { messageRetentionDuration: 600 }, topicSchema: () => env.core.topicSchema('orders') },
    ),
  );
  await writer.open();
  return writer;
}

describe('bigqueryConfig.useTopicSchema', () => {
  it("writes each field to its mapped DuckDB column, with metadata, per key in order; a later revision's field too", async () => {
    await sql(`CREATE TABLE orders(
      id VARCHAR NOT NULL, qty INTEGER NOT NULL, total DECIMAL(10,2) NOT NULL, placed TIMESTAMPTZ NOT NULL, note VARCHAR,
      tags VARCHAR[] NOT NULL, status VARCHAR NOT NULL, channel VARCHAR,
      subscription_name VARCHAR, message_id VARCHAR, publish_time TIMESTAMP, attributes JSON, ordering_key VARCHAR, sequence BIGINT)`);
    await env.core.createSubscription('to-table', {
      topic: 'orders',
      enableMessageOrdering: true,
      bigqueryConfig: { table: 'p.main.orders', useTopicSchema: true, writeMetadata: true },
    });
    await env.exports.sync();
    await env.core.publish('orders', [{ data: order('a', 1), orderingKey: 'k' }]);
    await env.core.publish('orders', [{ data: order('b', 2), orderingKey: 'k' }]);
    await env.core.schemas.commit({ name: 'projects/p/schemas/order', schema: { type: 'AVRO', definition: JSON.stringify(ORDER_V2) } });
    await env.core.publish('orders', [{ data: order('c', 3, { channel: 'app' }), orderingKey: 'k' }]);
    await waitFor('rows', async () => Number((await sql('SELECT count(*) n FROM orders'))[0]!.n) === 3);
    const rows = await sql(
      `SELECT id, qty, total::VARCHAR total, placed = TIMESTAMPTZ '2024-05-01 12:00:00+00' placed_ok, note, tags, status, channel, ordering_key, sequence,
              json_extract_string(attributes, '$.googclient_schemaencoding') enc FROM orders ORDER BY rowid`,
    );
    expect(rows.map((r) => ({ ...r, tags: (r.tags as { items: string[] }).items }))).toEqual([
      {
        id: 'a',
        qty: 1,
        total: '12.34',
        placed_ok: true,
        note: null,
        tags: ['a'],
        status: 'PAID',
        channel: null,
        ordering_key: 'k',
        sequence: 1n,
        enc: 'JSON',
      },
      {
        id: 'b',
        qty: 2,
        total: '12.34',
        placed_ok: true,
        note: 'n2',
        tags: ['b'],
        status: 'PAID',
        channel: null,
        ordering_key: 'k',
        sequence: 2n,
        enc: 'JSON',
      },
      {
        id: 'c',
        qty: 3,
        total: '12.34',
        placed_ok: true,
        note: null,
        tags: ['c'],
        status: 'PAID',
        channel: 'app',
        ordering_key: 'k',
        sequence: 3n,
        enc: 'JSON',
      },
    ]);
  });

  it('applies CDC changes whose _CHANGE_TYPE and _CHANGE_SEQUENCE_NUMBER are fields of the topic schema', async () => {
    const change = {
      type: 'record',
      name: 'StockChange',
      fields: [
        { name: 'id', type: 'string' },
        { name: 'qty', type: ['null', 'int'] },
        { name: '_CHANGE_TYPE', type: 'string' },
        { name: '_CHANGE_SEQUENCE_NUMBER', type: ['null', 'string'] },
      ],
    };
    await env.core.schemas.create({
      parent: 'projects/p',
      schemaId: 'stock',
      schema: { type: 'AVRO', definition: JSON.stringify(change) },
    });
    await env.core.createTopic('stock', { schemaSettings: { schema: 'projects/p/schemas/stock', encoding: 'JSON' } });
    await sql('CREATE TABLE stock(id VARCHAR PRIMARY KEY, qty INTEGER)');
    await env.core.createSubscription('to-stock', {
      topic: 'stock',
      enableMessageOrdering: true,
      bigqueryConfig: { table: 'p.main.stock', useTopicSchema: true },
    });
    await env.exports.sync();
    const message = (id: string, type: string, seq: string | null, qty: number | null = null) => ({
      data: JSON.stringify({
        id,
        qty: qty === null ? null : { int: qty },
        _CHANGE_TYPE: type,
        _CHANGE_SEQUENCE_NUMBER: seq === null ? null : { string: seq },
      }),
      orderingKey: id,
    });
    await env.core.publish('stock', [
      message('a', 'UPSERT', '1', 1),
      message('b', 'UPSERT', null, 2),
      message('a', 'UPSERT', '3', 5),
      message('a', 'UPSERT', '2', 4), // older than 3: ignored
      message('b', 'DELETE', null),
    ]);
    await waitFor('the changes', () => env.core.metrics('to-stock').backlogMessages === 0);
    expect(env.core.getSubscription('to-stock').state).toBe('ACTIVE');
    expect(await sql('SELECT id, qty FROM stock ORDER BY id')).toEqual([{ id: 'a', qty: 5 }]);
  });

  it('takes a proto3 CDC field declared without optional and left unset as no value, as BigQuery reads it', async () => {
    // Unset, such a field is not on the wire and decodes as "": BigQuery's Storage Write API reads rows
    // with proto2 semantics (a default is not encoded), so it sees no _CHANGE_SEQUENCE_NUMBER, or no
    // _CHANGE_TYPE (a plain row), not an empty one that every such message would fail on.
    await env.core.schemas.create({
      parent: 'projects/p',
      schemaId: 'stock-proto',
      schema: {
        type: 'PROTOCOL_BUFFER',
        definition:
          'syntax = "proto3"; message StockChange { string id = 1; int64 qty = 2; string _CHANGE_TYPE = 3; string _CHANGE_SEQUENCE_NUMBER = 4; }',
      },
    });
    await env.core.createTopic('stock', { schemaSettings: { schema: 'projects/p/schemas/stock-proto', encoding: 'JSON' } });
    await env.core.createTopic('stock-dead');
    await env.core.createSubscription('stock-dead-sub', { topic: 'stock-dead' });
    await sql('CREATE TABLE stock(id VARCHAR PRIMARY KEY, qty BIGINT NOT NULL)');
    await env.core.createSubscription('to-stock', {
      topic: 'stock',
      enableMessageOrdering: true,
      deadLetterPolicy: { deadLetterTopic: 'stock-dead', maxDeliveryAttempts: 5 },
      bigqueryConfig: { table: 'p.main.stock', useTopicSchema: true },
    });
    await env.exports.sync();
    const message = (fields: Record<string, unknown>) => ({ data: JSON.stringify(fields), orderingKey: String(fields.id) });
    await env.core.publish('stock', [
      message({ id: 'a', qty: 1, _CHANGE_TYPE: 'UPSERT' }),
      message({ id: 'a', qty: 5, _CHANGE_TYPE: 'UPSERT', _CHANGE_SEQUENCE_NUMBER: '' }),
      message({ id: 'b', qty: 2, _CHANGE_TYPE: 'UPSERT', _CHANGE_SEQUENCE_NUMBER: '2' }),
      message({ id: 'b', qty: 3, _CHANGE_TYPE: 'UPSERT', _CHANGE_SEQUENCE_NUMBER: '1' }), // older than 2: ignored
      message({ id: 'c', qty: 7 }), // no _CHANGE_TYPE: a plain row
      message({ id: 'a', _CHANGE_TYPE: 'DELETE' }),
      message({ id: 'd', qty: 4, _CHANGE_TYPE: 'UPSERT' }),
    ]);
    await waitFor('the changes', () => env.core.metrics('to-stock').backlogMessages === 0);
    expect(await env.core.pull('stock-dead-sub', { maxMessages: 10 })).toEqual([]);
    expect(await sql('SELECT id, qty FROM stock ORDER BY id')).toEqual([
      { id: 'b', qty: 2n },
      { id: 'c', qty: 7n },
      { id: 'd', qty: 4n },
    ]);
  });

  it("takes the topic schema's CDC fields in any letter case, as columns are, even with dropUnknownFields", async () => {
    const change = {
      type: 'record',
      name: 'PetChange',
      fields: [
        { name: 'id', type: 'string' },
        { name: 'name', type: ['null', 'string'] },
        { name: '_change_type', type: 'string' },
        { name: '_change_sequence_number', type: ['null', 'string'] },
      ],
    };
    await env.core.schemas.create({ parent: 'projects/p', schemaId: 'pets', schema: { type: 'AVRO', definition: JSON.stringify(change) } });
    await env.core.createTopic('pets', { schemaSettings: { schema: 'projects/p/schemas/pets', encoding: 'JSON' } });
    await sql('CREATE TABLE pets(id VARCHAR PRIMARY KEY, name VARCHAR)');
    await env.core.createSubscription('to-pets', {
      topic: 'pets',
      enableMessageOrdering: true,
      bigqueryConfig: { table: 'p.main.pets', useTopicSchema: true, dropUnknownFields: true },
    });
    await env.exports.sync();
    const message = (id: string, type: string, seq: string, name: string | null = null) => ({
      data: JSON.stringify({
        id,
        name: name === null ? null : { string: name },
        _change_type: type,
        _change_sequence_number: { string: seq },
      }),
      orderingKey: id,
    });
    // Dropped as unknown fields, the changes were appended as rows: the DELETE inserted one, the stale UPSERT too.
    await env.core.publish('pets', [
      message('rex', 'UPSERT', '1', 'Rex'),
      message('rex', 'UPSERT', '3', 'Max'),
      message('rex', 'UPSERT', '2', 'stale'),
      message('tom', 'DELETE', '1'),
    ]);
    await waitFor('the changes', () => env.core.metrics('to-pets').backlogMessages === 0);
    expect(env.core.getSubscription('to-pets').state).toBe('ACTIVE');
    expect(await sql('SELECT id, name FROM pets ORDER BY id')).toEqual([{ id: 'rex', name: 'Max' }]);
  });

  it('dropUnknownFields drops the fields a later revision adds to nested records (in lists and maps too), not only top-level ones', async () => {
    await env.core.schemas.create({
      parent: 'projects/p',
      schemaId: 'shipment',
      schema: { type: 'AVRO', definition: JSON.stringify(SHIPMENT_V1) },
    });
    await env.core.createTopic('shipments', { schemaSettings: { schema: 'projects/p/schemas/shipment', encoding: 'JSON' } });
    const columns = 'id VARCHAR NOT NULL, stops STRUCT(city VARCHAR)[] NOT NULL, codes MAP(VARCHAR, STRUCT(city VARCHAR)) NOT NULL';
    await sql(`CREATE TABLE shipments(${columns}, dest STRUCT(street VARCHAR) NOT NULL);
      CREATE TABLE retyped(${columns}, dest STRUCT(street INTEGER) NOT NULL)`);
    for (const [name, table] of [
      ['to-shipments', 'shipments'],
      ['to-retyped', 'retyped'],
    ])
      await env.core.createSubscription(name!, {
        topic: 'shipments',
        enableMessageOrdering: true,
        bigqueryConfig: { table: `p.main.${table}`, useTopicSchema: true, dropUnknownFields: true },
      });
    await env.exports.sync();
    await env.core.publish('shipments', [{ data: shipmentV1('a'), orderingKey: 'k' }]);
    await env.core.schemas.commit({
      name: 'projects/p/schemas/shipment',
      schema: { type: 'AVRO', definition: JSON.stringify(SHIPMENT_V2) },
    });
    await env.core.publish('shipments', [{ data: shipmentV2('b'), orderingKey: 'k' }]);
    await waitFor('rows', () => env.core.metrics('to-shipments').backlogMessages === 0);
    expect(await sql('SELECT id, dest::VARCHAR dest, stops::VARCHAR stops, codes::VARCHAR codes FROM shipments ORDER BY rowid')).toEqual([
      { id: 'a', dest: "{'street': a St}", stops: "[{'city': Oslo}]", codes: "{x={'city': Oslo}}" },
      { id: 'b', dest: "{'street': b St}", stops: "[{'city': Rome}]", codes: "{x={'city': Oslo}}" },
    ]);
    // A nested field of another type is not an unknown field: the table does not fit.
    await waitFor('SCHEMA_MISMATCH', () => env.core.getSubscription('to-retyped').state === 'SCHEMA_MISMATCH');
    expect(env.exports.runner('to-retyped')!.stats.stateReason).toMatch(/column "dest" is STRUCT\("street" INTEGER\)/);
  });

  it("a message of a revision without a nested record's newer field is written, the field NULL, as a missing top-level field is", async () => {
    await env.core.schemas.create({
      parent: 'projects/p',
      schemaId: 'shipment',
      schema: { type: 'AVRO', definition: JSON.stringify(SHIPMENT_V1) },
    });
    await env.core.schemas.commit({
      name: 'projects/p/schemas/shipment',
      schema: { type: 'AVRO', definition: JSON.stringify(SHIPMENT_V2) },
    });
    await env.core.createTopic('shipments', { schemaSettings: { schema: 'projects/p/schemas/shipment', encoding: 'JSON' } });
    // The table of the newer revision, without dropUnknownFields.
    await sql(`CREATE TABLE shipments(id VARCHAR NOT NULL, dest STRUCT(street VARCHAR, zip VARCHAR) NOT NULL,
      stops STRUCT(city VARCHAR, eta BIGINT)[] NOT NULL, codes MAP(VARCHAR, STRUCT(city VARCHAR, eta BIGINT)) NOT NULL)`);
    await env.core.createSubscription('to-shipments', {
      topic: 'shipments',
      enableMessageOrdering: true,
      bigqueryConfig: { table: 'p.main.shipments', useTopicSchema: true },
    });
    await env.exports.sync();
    await env.core.publish('shipments', [
      { data: shipmentV1('a'), orderingKey: 'k' },
      { data: shipmentV2('b'), orderingKey: 'k' },
    ]);
    await waitFor('rows', () => env.core.metrics('to-shipments').backlogMessages === 0);
    expect(await sql('SELECT id, dest::VARCHAR dest, stops::VARCHAR stops, codes::VARCHAR codes FROM shipments ORDER BY rowid')).toEqual([
      { id: 'a', dest: "{'street': a St, 'zip': NULL}", stops: "[{'city': Oslo, 'eta': NULL}]", codes: "{x={'city': Oslo, 'eta': NULL}}" },
      { id: 'b', dest: "{'street': b St, 'zip': 0150}", stops: "[{'city': Rome, 'eta': 5}]", codes: "{x={'city': Oslo, 'eta': 7}}" },
    ]);
  });

  it('a table whose columns do not fit the topic schema puts the subscription in SCHEMA_MISMATCH and keeps the messages', async () => {
    await sql('CREATE TABLE narrow(id VARCHAR, qty BIGINT)');
    await env.core.createSubscription('to-narrow', { topic: 'orders', bigqueryConfig: { table: 'p.main.narrow', useTopicSchema: true } });
    await env.exports.sync();
    await env.core.publish('orders', [{ data: order('a', 1) }]);
    await waitFor('state', () => env.core.getSubscription('to-narrow').state === 'SCHEMA_MISMATCH');
    expect(env.exports.runner('to-narrow')!.stats.stateReason).toMatch(
      /column "qty" is BIGINT, but the topic schema's field maps to INTEGER|has no column "total"/,
    );
    expect(env.core.metrics('to-narrow').backlogMessages).toBe(1);
  });
  it('a stop while a new revision has no column loses nothing: after ALTER TABLE and a restart every row is there, in key order', async () => {
    await sql(`CREATE TABLE grown(id VARCHAR, qty INTEGER, total DECIMAL(10,2), placed TIMESTAMPTZ, note VARCHAR, tags VARCHAR[],
      status VARCHAR, ordering_key VARCHAR, sequence BIGINT, subscription_name VARCHAR, message_id VARCHAR, publish_time TIMESTAMP, attributes JSON)`);
    await env.core.createSubscription('to-grown', {
      topic: 'orders',
      enableMessageOrdering: true,
      bigqueryConfig: { table: 'p.main.grown', useTopicSchema: true, writeMetadata: true },
    });
    await env.exports.sync();
    await env.core.publish('orders', [{ data: order('a', 1), orderingKey: 'k' }]);
    await waitFor('the first row', async () => Number((await sql('SELECT count(*) n FROM grown'))[0]!.n) === 1);
    await env.core.schemas.commit({ name: 'projects/p/schemas/order', schema: { type: 'AVRO', definition: JSON.stringify(ORDER_V2) } });
    await env.core.publish('orders', [{ data: order('b', 2, { channel: 'app' }), orderingKey: 'k' }]);
    await waitFor('SCHEMA_MISMATCH', () => env.core.getSubscription('to-grown').state === 'SCHEMA_MISMATCH');
    // Delivered while the sink refuses b (no channel column): they wait behind it.
    await env.core.publish('orders', [{ data: order('c', 3), orderingKey: 'k' }]);
    await env.core.publish('orders', [{ data: order('d', 4), orderingKey: 'other' }]);
    await waitFor('the deliveries', () => (env.exports.runner('to-grown')?.outstanding ?? 0) === 3);
    await env.close();
    await queryDuckDb(env.duckdbPath, 'ALTER TABLE grown ADD COLUMN channel VARCHAR');
    env = await openExport(dir.path, { objectStorage: s3.settings });
    await waitFor('the backlog', () => env.core.metrics('to-grown').backlogMessages === 0);
    expect(await sql('SELECT id, channel, ordering_key, sequence FROM grown ORDER BY ordering_key, sequence')).toEqual([
      { id: 'a', channel: null, ordering_key: 'k', sequence: 1n },
      { id: 'b', channel: 'app', ordering_key: 'k', sequence: 2n },
      { id: 'c', channel: null, ordering_key: 'k', sequence: 3n },
      { id: 'd', channel: null, ordering_key: 'other', sequence: 1n },
    ]);
  });

  it("a backlog message is still written by its revision after the topic's schema was cleared", async () => {
    // The table does not exist yet: the message stays in the backlog while the schema is cleared.
    await env.core.createSubscription('to-late', { topic: 'orders', bigqueryConfig: { table: 'p.main.late', useTopicSchema: true } });
    await env.exports.sync();
    await env.core.publish('orders', [{ data: order('a', 1) }]);
    await waitFor('missing table', () => env.core.getSubscription('to-late').state !== 'ACTIVE');
    await env.core.updateTopic('orders', { schemaSettings: null });
    await sql(
      `CREATE TABLE late(id VARCHAR, qty INTEGER, total DECIMAL(10,2), placed TIMESTAMPTZ, note VARCHAR, tags VARCHAR[], status VARCHAR)`,
    );
    await waitFor('row', async () => Number((await sql('SELECT count(*) n FROM late'))[0]!.n) === 1);
    expect(await sql('SELECT id, qty, status FROM late')).toEqual([{ id: 'a', qty: 1, status: 'PAID' }]);
    // The row is committed before its message is acked: the ack follows (it lagged the row in a loaded CI run).
    await waitFor('the ack', () => env.core.metrics('to-late').backlogMessages === 0);
  });
});

describe('cloudStorageConfig.avroConfig.useTopicSchema', () => {
  it('writes Avro files with the topic schema (plus metadata) that avsc reads back with that schema', async () => {
    const bucket = await s3.bucket();
    await env.core.createSubscription('to-files', {
      topic: 'orders',
      enableMessageOrdering: true,
      // s3rver cannot serve a key with "+" (the default name's "+00:00"): a Z in the name instead.
      cloudStorageConfig: {
        bucket,
        filenameDatetimeFormat: 'YYYY-MM-DDThh:mm:ssZ',
        avroConfig: { useTopicSchema: true, writeMetadata: true },
      },
    });
    await env.exports.sync();
    await env.core.publish('orders', [{ data: order('a', 1), orderingKey: 'k' }]);
    await env.core.publish('orders', [{ data: order('b', 2), orderingKey: 'k' }]);
    await waitFor('deliveries', () => (env.exports.runner('to-files')?.outstanding ?? 0) >= 2);
    await env.exports.stop(); // finalizes the open file
    const [name] = await s3.list(bucket);
    const body = await s3.get(bucket, name!);
    const { header, values, fields } = await readWithAvsc(body);
    expect(fields).toEqual([
      ...ORDER_V1.fields.map((f) => f.name),
      'subscription_name',
      'message_id',
      'publish_time',
      'attributes',
      'ordering_key',
      'sequence',
    ]);
    expect((header as { name: string }).name).toBe('shop.Order');
    expect(values.map((v) => [v.id, v.qty, v.note, v.tags, v.status, v.ordering_key, v.sequence])).toEqual([
      ['a', 1, null, ['a'], 'PAID', 'k', 1],
      ['b', 2, 'n2', ['b'], 'PAID', 'k', 2],
    ]);
    expect(Buffer.from(values[0]!.total as Buffer)).toEqual(Buffer.from([0x04, 0xd2]));
    expect(values[0]!.attributes).toMatchObject({ googclient_schemaname: 'projects/p/schemas/order', orderingKey: 'k' });
    // Orderly's reader (audit, query) reads the same file.
    const records = await readRecords(body, { kind: 'avro', writeMetadata: true, useTopicSchema: true });
    expect(records.map((r) => [r.orderingKey, r.sequence, r.value?.id])).toEqual([
      ['k', 1, 'a'],
      ['k', 2, 'b'],
    ]);
  });

  it.each([
    {
      kind: 'an Avro record that contains itself',
      type: 'AVRO',
      definition: JSON.stringify({
        type: 'record',
        name: 'Node',
        fields: [
          { name: 'v', type: 'int' },
          { name: 'next', type: ['null', 'Node'], default: null },
        ],
      }),
      data: { v: 1, next: { Node: { v: 2, next: null } } },
      top: 'NodeWithMetadata',
      value: { v: 1, next: { v: 2, next: null } },
    },
    {
      kind: 'a protobuf message that contains itself',
      type: 'PROTOCOL_BUFFER',
      definition: 'syntax = "proto3"; message A { int32 x = 1; repeated A kids = 9; }',
      data: { x: 1, kids: [{ x: 2 }] },
      top: 'AWithMetadata',
      value: { x: 1, kids: [{ x: 2, kids: [] }] },
    },
  ])(
    'writeMetadata on $kind: the file holds the message, metadata on the top-level record only',
    async ({ type, definition, data, top, value }) => {
      const bucket = await s3.bucket();
      await env.core.schemas.create({ parent: 'projects/p', schemaId: 'tree', schema: { type, definition } });
      await env.core.createTopic('trees', { schemaSettings: { schema: 'projects/p/schemas/tree', encoding: 'JSON' } });
      await env.core.createSubscription('trees-to-files', {
        topic: 'trees',
        cloudStorageConfig: {
          bucket,
          filenameDatetimeFormat: 'YYYY-MM-DDThh:mm:ssZ',
          avroConfig: { useTopicSchema: true, writeMetadata: true },
        },
      });
      await env.exports.sync();
      await env.core.publish('trees', [{ data: JSON.stringify(data) }]);
      await waitFor('delivery', () => (env.exports.runner('trees-to-files')?.outstanding ?? 0) >= 1);
      await env.exports.stop(); // finalizes the open file
      const [name] = await s3.list(bucket);
      const { header, values } = await readWithAvsc(await s3.get(bucket, name!));
      expect((header as { name: string }).name).toBe(top);
      expect(values).toHaveLength(1);
      expect(values[0]).toMatchObject({ ...value, subscription_name: 'projects/p/subscriptions/trees-to-files', sequence: 1 });
    },
  );

  it('a topic schema with a long default beyond 2^53 is written, the default exact in the file header', async () => {
    // CreateSchema keeps such a default exact; the export refused every message of the topic ("an Avro
    // file header (JSON) cannot hold" it), though JSON text holds any integer and Avro readers read it.
    const definition =
      '{"type":"record","name":"Big","fields":[{"name":"id","type":"string"},{"name":"n","type":"long","default":9007199254740993}]}';
    await env.core.schemas.create({ parent: 'projects/p', schemaId: 'big', schema: { type: 'AVRO', definition } });
    await env.core.createTopic('bigs', { schemaSettings: { schema: 'projects/p/schemas/big', encoding: 'JSON' } });
    const bucket = await s3.bucket();
    await env.core.createSubscription('bigs-to-files', {
      topic: 'bigs',
      cloudStorageConfig: { bucket, filenameDatetimeFormat: 'YYYY-MM-DDThh:mm:ssZ', avroConfig: { useTopicSchema: true } },
    });
    await env.exports.sync();
    await env.core.publish('bigs', [{ data: '{"id":"a","n":42}' }]);
    await waitFor('delivery', () => (env.exports.runner('bigs-to-files')?.outstanding ?? 0) >= 1);
    await env.exports.stop(); // finalizes the open file
    const names = await s3.list(bucket);
    expect(names).toHaveLength(1);
    const body = await s3.get(bucket, names[0]!);
    expect(body.toString('latin1')).toContain('{"name":"n","type":"long","default":9007199254740993}');
    // avsc parses the header with JSON.parse (the default rounded, which reading records does not use) and
    // refuses an unsafe long default as such: a bigint long takes it.
    const long = avro.types.LongType.__with({
      fromBuffer: (buf: Buffer) => buf.readBigInt64LE(),
      toBuffer: (n: bigint) => Buffer.from(new BigInt64Array([n]).buffer),
      fromJSON: (n: number) => BigInt(n),
      toJSON: Number,
      isValid: (n: unknown) => typeof n === 'bigint',
      compare: (a: bigint, b: bigint) => (a === b ? 0 : a < b ? -1 : 1),
    });
    const decoder = new avro.streams.BlockDecoder({ parseHook: (schema) => avro.Type.forSchema(schema, { registry: { long } }) });
    const values: unknown[] = [];
    decoder.on('data', (v: unknown) => values.push({ ...(v as object) }));
    Readable.from([body]).pipe(decoder);
    await once(decoder, 'end');
    expect(values).toEqual([{ id: 'a', n: 42n }]);
  });

  it.each([false, true])(
    "the file header is the topic schema as defined: an enum's default and a logical type avsc does not know are kept (writeMetadata %s)",
    async (writeMetadata) => {
      const reading = {
        type: 'record',
        name: 'Reading',
        fields: [
          { name: 'at', type: { type: 'long', logicalType: 'timestamp-nanos' } },
          { name: 'level', type: { type: 'enum', name: 'Level', symbols: ['UNKNOWN', 'HIGH'], default: 'UNKNOWN' } },
        ],
      };
      await env.core.schemas.create({
        parent: 'projects/p',
        schemaId: 'reading',
        schema: { type: 'AVRO', definition: JSON.stringify(reading) },
      });
      await env.core.createTopic('readings', { schemaSettings: { schema: 'projects/p/schemas/reading', encoding: 'JSON' } });
      const bucket = await s3.bucket();
      await env.core.createSubscription('readings-to-files', {
        topic: 'readings',
        cloudStorageConfig: { bucket, filenameDatetimeFormat: 'YYYY-MM-DDThh:mm:ssZ', avroConfig: { useTopicSchema: true, writeMetadata } },
      });
      await env.exports.sync();
      await env.core.publish('readings', [{ data: '{"at": 1700000000000000, "level": "HIGH"}' }]);
      await waitFor('delivery', () => (env.exports.runner('readings-to-files')?.outstanding ?? 0) >= 1);
      await env.exports.stop(); // finalizes the open file
      const names = await s3.list(bucket);
      expect(names).toHaveLength(1);
      const decoder = new avro.streams.BlockDecoder();
      let header: { fields: Array<{ name: string; type: unknown }> } | undefined;
      decoder.on('metadata', (_type: avro.Type, _codec: string, h: { meta: Record<string, Buffer> }) => {
        header = JSON.parse(h.meta['avro.schema']!.toString()) as typeof header;
      });
      const values: Record<string, unknown>[] = [];
      decoder.on('data', (v: Record<string, unknown>) => values.push(v));
      Readable.from([await s3.get(bucket, names[0]!)]).pipe(decoder);
      await once(decoder, 'end');
      expect(header!.fields.slice(0, 2)).toEqual(reading.fields);
      expect(values).toEqual([expect.objectContaining({ at: 1700000000000000, level: 'HIGH' })]);
    },
  );

  it("a new revision starts a new file laid out by it; an older revision's message is resolved into that layout", async () => {
    const bucket = await s3.bucket();
    await env.core.createSubscription('source', { topic: 'orders', enableMessageOrdering: true });
    const writer = await openAvroWriter(bucket, { useTopicSchema: true });
    // Deliveries of a plain subscription of the topic, acked there at once so its key's next messages come.
    const delivered = async () => {
      const got = await env.core.pull('source', { maxMessages: 10 });
      await env.core.acknowledge(
        'source',
        got.map((m) => m.ackId),
      );
      return got.map((m) => ({ id: m.ackId, message: m.message, deliveryAttempt: 0 }));
    };
    await env.core.publish('orders', [{ data: order('a', 1), orderingKey: 'k' }]);
    const written = (await writer.write(await delivered())).written;
    await env.core.schemas.commit({ name: 'projects/p/schemas/order', schema: { type: 'AVRO', definition: JSON.stringify(ORDER_V2) } });
    await env.core.publish('orders', [{ data: order('c', 3, { channel: 'app' }), orderingKey: 'k' }]);
    await env.core.publish('orders', [{ data: order('d', 4), orderingKey: 'k' }]);
    // A message published before the topic had a schema cannot be read with it: it fails alone.
    const noSchema = {
      id: 'plain',
      deliveryAttempt: 0,
      message: { messageId: '999', publishTime: new Date(), data: Buffer.from('x'), attributes: {}, orderingKey: '', sequence: 1 },
    };
    const second = await writer.write([...(await delivered()), noSchema]);
    expect(second.failed).toEqual([
      { id: 'plain', error: expect.stringMatching(/no googclient_schemarevisionid attribute/), retryable: false },
    ]);
    written.push(...second.written, ...(await writer.flush('all')).written);
    expect(written).toHaveLength(3);
    await writer.close();
    const names = await s3.list(bucket);
    expect(names).toHaveLength(2);
    const [first, later] = await Promise.all(names.map(async (n) => readWithAvsc(await s3.get(bucket, n))));
    expect(first!.fields).toEqual(ORDER_V1.fields.map((f) => f.name));
    expect(first!.values.map((v) => v.id)).toEqual(['a']);
    expect(later!.fields).toEqual(ORDER_V2.fields.map((f) => f.name));
    expect(later!.values.map((v) => [v.id, v.channel])).toEqual([
      ['c', 'app'],
      ['d', 'web'],
    ]);
  });
});

describe('avroConfig.useTopicSchema with writeMetadata across revisions of which one is recursive', () => {
  // The recursive revision's top-level record is NodeWithMetadata, the other's Node: each message of the
  // revision a file is not laid out by goes through Avro resolution, whatever the order of the revisions.
  const plain = { type: 'record', name: 'Node', fields: [{ name: 'v', type: 'int' }] };
  const recursive = { ...plain, fields: [...plain.fields, { name: 'next', type: ['null', 'Node'], default: null }] };
  // Avro's JSON encoding names every field, one with a default too.
  const node = (schema: object, v: number) => JSON.stringify(schema === recursive ? { v, next: null } : { v });
  it.each([
    { kind: 'the newer revision adds the self-reference', older: plain, newer: recursive, top: 'NodeWithMetadata' },
    { kind: 'the newer revision drops the self-reference', older: recursive, newer: plain, top: 'Node' },
  ])('$kind: an older message is resolved into the file laid out by the newer', async ({ older, newer, top }) => {
    const bucket = await s3.bucket();
    await env.core.schemas.create({ parent: 'projects/p', schemaId: 'node', schema: { type: 'AVRO', definition: JSON.stringify(older) } });
    await env.core.createTopic('nodes', { schemaSettings: { schema: 'projects/p/schemas/node', encoding: 'JSON' } });
    await env.core.createSubscription('source', { topic: 'nodes' });
    const config = parseObjectStorageConfig({
      bucket,
      filenameDatetimeFormat: 'YYYY-MM-DDThh:mm:ssZ',
      avroConfig: { useTopicSchema: true, writeMetadata: true },
    });
    const writer = new ObjectStorageWriter(
      config,
      writerContext(
        'files',
        { dataDir: dir.path, objectStorage: s3.settings },
        { spec: { messageRetentionDuration: 600 }, topicSchema: () => env.core.topicSchema('nodes') },
      ),
    );
    await writer.open();
    await env.core.publish('nodes', [{ data: node(older, 1) }]);
    await env.core.schemas.commit({ name: 'projects/p/schemas/node', schema: { type: 'AVRO', definition: JSON.stringify(newer) } });
    await env.core.publish('nodes', [{ data: node(newer, 2) }]);
    const got = await env.core.pull('source', { maxMessages: 10 });
    expect(got).toHaveLength(2);
    const result = await writer.write(got.map((m) => ({ id: m.ackId, message: m.message, deliveryAttempt: 0 })));
    expect(result.failed).toEqual([]);
    expect([...result.written, ...(await writer.flush('all')).written]).toHaveLength(2);
    await writer.close();
    const names = await s3.list(bucket);
    expect(names).toHaveLength(1);
    const { header, values } = await readWithAvsc(await s3.get(bucket, names[0]!));
    expect((header as { name: string }).name).toBe(top);
    expect(values.map((v) => v.v).sort()).toEqual([1, 2]);
  });
});

describe("useTopicSchema after the topic's schema was cleared", () => {
  it('an Avro file export reads each message by its own revision and lays the file out by it', async () => {
    const bucket = await s3.bucket();
    await env.core.createSubscription('source', { topic: 'orders', enableMessageOrdering: true });
    const writer = await openAvroWriter(bucket, { useTopicSchema: true, writeMetadata: true });
    await env.core.publish('orders', [{ data: order('a', 1), orderingKey: 'k' }]);
    await env.core.updateTopic('orders', { schemaSettings: null });
    // Published without a schema: it names no revision, so it alone fails.
    await env.core.publish('orders', [{ data: Buffer.from('plain'), orderingKey: 'other' }]);
    const got = await env.core.pull('source', { maxMessages: 10 });
    const result = await writer.write(got.map((m) => ({ id: m.ackId, message: m.message, deliveryAttempt: 0 })));
    const plain = got.find((m) => m.message.orderingKey === 'other')!;
    expect(result.failed).toEqual([
      { id: plain.ackId, error: expect.stringMatching(/no googclient_schemarevisionid attribute/), retryable: false },
    ]);
    expect([...result.written, ...(await writer.flush('all')).written]).toEqual([got.find((m) => m.message.orderingKey === 'k')!.ackId]);
    await writer.close();
    const [name] = await s3.list(bucket);
    const { header, values } = await readWithAvsc(await s3.get(bucket, name!));
    expect((header as { name: string }).name).toBe('shop.Order');
    expect(values.map((v) => [v.id, v.qty, v.ordering_key])).toEqual([['a', 1, 'k']]);
  });
});

/** An Avro file read by avsc alone, with the schema from its header. */
async function readWithAvsc(body: Buffer): Promise<{ header: avro.Schema; fields: string[]; values: Record<string, unknown>[] }> {
  const decoder = new avro.streams.BlockDecoder();
  let header: avro.Schema | undefined;
  decoder.on('metadata', (type: avro.Type) => (header = type.schema()));
  const values: Record<string, unknown>[] = [];
  decoder.on('data', (v: Record<string, unknown>) => values.push(v));
  Readable.from([body]).pipe(decoder);
  await once(decoder, 'end');
  return { header: header!, fields: (header as { fields: { name: string }[] }).fields.map((f) => f.name), values };
}
