import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { inspect, promisify } from 'node:util';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { closeDuckDb, queryDuckDb } from '../../src/duckdb/database.js';
import { queryDuckDb as publicQueryDuckDb } from '../../src/index.js';
import { serveMetrics, statusOf } from '../../src/job/metrics.js';
import { createLogger } from '../../src/log.js';
import { tempDir } from '../../test/helpers/temp-dir.js';
import { openExport } from '../../test/helpers/export.js';
import { waitFor } from '../../test/helpers/wait-for.js';
import { parseDuckDbTableConfig } from './config.js';
import { duckdbTableConnector } from './index.js';
import { DuckDbTableWriter } from './table-writer.js';
import { keyedExportMessage, writerContext } from '../../test/helpers/writer-context.js';
import { SinkStateError, type WriteResult } from '../../src/connector/connector.js';

let dir: ReturnType<typeof tempDir>;
let env: Awaited<ReturnType<typeof openExport>>;
const sql = (q: string) => queryDuckDb(env.duckdbPath, q);
const backlog = (sub: string) => env.core.metrics(sub).backlogMessages;

beforeEach(async () => {
  dir = tempDir();
  env = await openExport(dir.path);
  await env.core.createTopic('events');
  await env.core.createTopic('dead');
  await env.core.createSubscription('dead-sub', { topic: 'dead' });
});
afterEach(async () => {
  await env.close();
  dir.remove();
});

/** Why each of up to `max` dead-lettered messages was refused, sorted. */
async function deadLetterReasons(max: number): Promise<(string | undefined)[]> {
  return (await env.core.pull('dead-sub', { maxMessages: max }))
    .map((m) => m.message.attributes.CloudPubSubDeadLetterSourceDeliveryErrorMessage)
    .sort();
}

/** An export whose refused messages go to the dead-letter topic at once (no retry backoff), to be read back. */
function exportWithDeadLetters(table: string, bigqueryConfig: Record<string, unknown>) {
  return exportTo(table, bigqueryConfig, {
    deadLetterPolicy: { deadLetterTopic: 'dead' },
    retryPolicy: { minimumBackoff: 0, maximumBackoff: 0 },
  });
}

async function exportTo(table: string, bigqueryConfig: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  await env.core.createSubscription('to-table', {
    topic: 'events',
    enableMessageOrdering: true,
    bigqueryConfig: { table, ...bigqueryConfig },
    ...extra,
  });
  await env.exports.sync();
}

describe('bigqueryConfig.writeMetadata', () => {
  it('writes the metadata columns with their types and each key in publish order', async () => {
    await sql(`CREATE SCHEMA analytics; CREATE TABLE analytics.events(
      subscription_name VARCHAR, message_id VARCHAR, publish_time TIMESTAMP, data VARCHAR, attributes JSON,
      ordering_key VARCHAR, sequence BIGINT)`);
    await exportTo('proj.analytics.events', { writeMetadata: true });
    const keys = ['k1', 'k2', 'k3'];
    for (let round = 0; round < 20; round++) {
      await env.core.publish(
        'events',
        keys.map((k) => ({ data: `${k}-${round}`, orderingKey: k, attributes: { round: String(round) } })),
      );
    }
    await waitFor('rows', async () => Number((await sql('SELECT count(*) n FROM analytics.events'))[0]!.n) === 60);
    const types = await sql(
      "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'events' ORDER BY ordinal_position",
    );
    expect(types.map((t) => t.data_type)).toEqual(['VARCHAR', 'VARCHAR', 'TIMESTAMP', 'VARCHAR', 'JSON', 'VARCHAR', 'BIGINT']);
    const rows = await sql('SELECT * FROM analytics.events ORDER BY rowid');
    for (const k of keys) {
      const mine = rows.filter((r) => r.ordering_key === k);
      // appended in publish order: rowid order equals sequence order
      expect(mine.map((r) => r.data)).toEqual(Array.from({ length: 20 }, (_, i) => `${k}-${i}`));
      expect(mine.map((r) => Number(r.sequence))).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    }
    const first = rows[0]!;
    expect(first.subscription_name).toBe('projects/p/subscriptions/to-table');
    expect(JSON.parse(String(first.attributes))).toEqual({ round: '0', orderingKey: first.ordering_key });
    expect(String(first.publish_time)).toMatch(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}/);
    expect(backlog('to-table')).toBe(0);
  });

  it('keeps payloads, ordering keys and attributes byte for byte: delimiters, quotes, line ends, NUL, empty', async () => {
    await sql(`CREATE TABLE events(subscription_name VARCHAR, message_id VARCHAR, publish_time TIMESTAMP, data VARCHAR,
      attributes JSON, ordering_key VARCHAR, sequence BIGINT)`);
    await exportTo('p.main.events', { writeMetadata: true });
    // What a staged (CSV-like) path could take for a field or row end, a quote, an escape or NULL.
    const payloads = ['a,b\n"c"\r\nd\\N', 'x\u0000y', '', 'ü\t;|\\'];
    const attributes = { 'q"u,o\nte': 'v\u0000w', empty: '' };
    await env.core.publish(
      'events',
      payloads.map((data, i) => ({ data, orderingKey: `k,"${i}"\n`, attributes })),
    );
    await waitFor('rows', async () => Number((await sql('SELECT count(*) n FROM events'))[0]!.n) === payloads.length);
    const rows = await sql('SELECT data, attributes, ordering_key FROM events ORDER BY sequence, ordering_key');
    expect(rows.map((r) => r.data)).toEqual(payloads);
    expect(rows.map((r) => r.ordering_key)).toEqual(payloads.map((_, i) => `k,"${i}"\n`));
    expect(rows.map((r) => JSON.parse(String(r.attributes)))).toEqual(
      payloads.map((_, i) => ({ ...attributes, orderingKey: `k,"${i}"\n` })),
    );
  });

  it('a service account that cannot be one is refused; an empty one is unset (Pub/Sub own agent)', () => {
    expect(() => parseDuckDbTableConfig({ table: 'p.d.t', serviceAccountEmail: 'nope' })).toThrow(
      'bigqueryConfig.serviceAccountEmail: must be a service account email, got "nope"',
    );
    expect(() => parseDuckDbTableConfig({ table: 'p.d.t', serviceAccountEmail: 7 })).toThrow('must be a service account email, got 7');
    expect(() => parseDuckDbTableConfig({ table: 'p.d.t', serviceAccountEmail: '' })).not.toThrow();
    expect(() => parseDuckDbTableConfig({ table: 'p.d.t', serviceAccountEmail: 'bq@p.iam.gserviceaccount.com' })).not.toThrow();
  });

  it('a table name BigQuery refuses is refused at creation; one it allows, however odd, is quoted, never executed', async () => {
    const evil = 'x"; DROP TABLE victims; --';
    expect(() => parseDuckDbTableConfig({ table: 'p.we.ird.t' })).toThrow('must be "project.dataset.table"');
    expect(() => parseDuckDbTableConfig({ table: 'p.d s.t' })).toThrow('bigqueryConfig.table: the dataset "d s" must be 1-1024 letters');
    expect(() => parseDuckDbTableConfig({ table: `p.main.${'t'.repeat(1025)}` })).toThrow('must be 1-1024 bytes');
    await expect(
      env.core.createSubscription('evil', { topic: 'events', bigqueryConfig: { table: `p.main.${evil}` } }),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringContaining(`the table ${JSON.stringify(evil)}`) });
    // Spaces, dashes and letters of any script are BigQuery table names; in SQL they are quoted.
    const odd = 'orders - été 2026';
    await sql(`CREATE TABLE main."${odd}"(data VARCHAR)`);
    await env.core.createSubscription('odd', { topic: 'events', bigqueryConfig: { table: `p.main.${odd}` } });
    await env.exports.sync();
    await env.core.publish('events', [{ data: 'hello' }]);
    await waitFor('row', async () => (await sql(`SELECT count(*) n FROM main."${odd}"`))[0]!.n === 1n);
    expect(await sql(`SELECT data FROM main."${odd}"`)).toEqual([{ data: 'hello' }]);
  });
});

describe('bigqueryConfig.useTableSchema', () => {
  beforeEach(async () => {
    await sql(`CREATE TABLE orders(
      order_id VARCHAR NOT NULL, qty INTEGER, price DOUBLE, paid BOOLEAN, placed_at TIMESTAMP, day DATE,
      address STRUCT(city VARCHAR, zip VARCHAR), tags VARCHAR[], extra JSON, big BIGINT)`);
  });

  it('maps JSON fields to columns with type conversion', async () => {
    await exportTo('p.main.orders', { useTableSchema: true });
    const doc = {
      order_id: 'o-1',
      qty: '3',
      price: 9.5,
      paid: true,
      placed_at: '2026-11-30T08:00:01.123456Z',
      day: '2026-11-30',
      address: { city: 'Lyon', zip: '69001' },
      tags: ['a', 'b'],
      extra: { nested: [1, { x: true }] },
      big: '9007199254740993',
    };
    await env.core.publish('events', [{ data: JSON.stringify(doc), orderingKey: 'o-1' }]);
    await waitFor('row', async () => (await sql('SELECT count(*) n FROM orders'))[0]!.n === 1n);
    const [row] = await sql(`SELECT order_id, qty, price, paid, strftime(placed_at, '%Y-%m-%dT%H:%M:%S.%f') placed, day::VARCHAR AS "day",
      address.city city, tags, extra::VARCHAR extra, big FROM orders`);
    expect(row).toMatchObject({
      order_id: 'o-1',
      qty: 3,
      price: 9.5,
      paid: true,
      placed: '2026-11-30T08:00:01.123456',
      day: '2026-11-30',
      city: 'Lyon',
      big: 9007199254740993n,
    });
    expect(JSON.parse(String(row!.extra))).toEqual({ nested: [1, { x: true }] });
  });

  it('unknown fields fail the message (to the dead-letter topic) unless dropUnknownFields', async () => {
    await exportTo(
      'p.main.orders',
      { useTableSchema: true },
      { deadLetterPolicy: { deadLetterTopic: 'dead', maxDeliveryAttempts: 5 }, retryPolicy: { minimumBackoff: 0, maximumBackoff: 0 } },
    );
    await env.core.publish('events', [
      { data: JSON.stringify({ order_id: 'a', colour: 'red' }), orderingKey: 'a' },
      { data: JSON.stringify({ order_id: 'a', qty: 2 }), orderingKey: 'a' },
      { data: JSON.stringify({ order_id: 'b', qty: 1 }), orderingKey: 'b' },
    ]);
    await waitFor('dead letter', async () => (await sql('SELECT count(*) n FROM orders'))[0]!.n === 2n && backlog('to-table') === 0);
    // the key moved on after the poison message was dead-lettered, in order
    expect(await sql('SELECT order_id, qty FROM orders ORDER BY rowid')).toEqual([
      { order_id: 'b', qty: 1 },
      { order_id: 'a', qty: 2 },
    ]);
    const [dead] = await env.core.pull('dead-sub');
    expect(dead!.message.attributes.CloudPubSubDeadLetterSourceDeliveryErrorMessage).toBe(
      'colour: no column "colour" in p.main.orders (set dropUnknownFields to ignore unknown fields)',
    );
    expect(dead!.message.attributes.CloudPubSubDeadLetterSourceDeliveryCount).toBe('5');
    // Status says so: 5 refusals and the reason, while the sink itself never failed.
    const row = statusOf(env.core, env.exports).find((r) => r.subscription.endsWith('/to-table'))!;
    expect(row).toMatchObject({ state: 'ACTIVE', exportErrors: 0, exportRefused: 5 });
    expect(row.lastExportRefusal?.message).toBe(
      'colour: no column "colour" in p.main.orders (set dropUnknownFields to ignore unknown fields)',
    );
  });

  it('with dropUnknownFields the unknown fields are ignored', async () => {
    await exportTo('p.main.orders', { useTableSchema: true, dropUnknownFields: true });
    await env.core.publish('events', [{ data: JSON.stringify({ order_id: 'a', colour: 'red', qty: 4 }), orderingKey: 'a' }]);
    await waitFor('row', async () => (await sql('SELECT count(*) n FROM orders'))[0]!.n === 1n);
    expect(await sql('SELECT order_id, qty FROM orders')).toEqual([{ order_id: 'a', qty: 4 }]);
  });

  it('data that is not UTF-8 fails its message for a VARCHAR data column, and is kept as sent in a BLOB one', async () => {
    await sql('CREATE TABLE texts(data VARCHAR); CREATE TABLE bytes(data BLOB)');
    await exportWithDeadLetters('p.main.texts', {});
    await env.core.createSubscription('to-bytes', { topic: 'events', bigqueryConfig: { table: 'p.main.bytes' } });
    await env.exports.sync();
    await env.core.publish('events', [{ data: Buffer.from([0xff, 0xfe, 0xfd]) }, { data: 'fine' }]);
    await waitFor(
      'the dead letter and both rows of bytes',
      async () => backlog('to-table') === 0 && backlog('dead-sub') === 1 && (await sql('SELECT count(*) n FROM bytes'))[0]!.n === 2n,
    );
    // Read leniently, it had been stored as three U+FFFD characters.
    expect(await sql('SELECT data FROM texts')).toEqual([{ data: 'fine' }]);
    const [dead] = await env.core.pull('dead-sub');
    expect(dead!.message.attributes.CloudPubSubDeadLetterSourceDeliveryErrorMessage).toBe(
      'data: not valid UTF-8 for the VARCHAR column data (a BLOB column takes any bytes)',
    );
    expect(await sql('SELECT hex(data) h FROM bytes ORDER BY h')).toEqual([{ h: '66696E65' }, { h: 'FFFEFD' }]);
  });

  it('stores values exactly as sent (64-bit integers, decimals, early dates, any name case), or fails the message naming why', async () => {
    await sql(`CREATE TABLE exact(id VARCHAR, big BIGINT, ubig UBIGINT, amount DECIMAL(20,4), f REAL, d DOUBLE, ts TIMESTAMP,
      day DATE, b BLOB, doc JSON, "Name" VARCHAR)`);
    await exportWithDeadLetters('p.main.exact', { useTableSchema: true });
    const good =
      '{"id":"g","big":9007199254740993,"ubig":18446744073709551615,"amount":"12345678901234.5678","f":1.5,"d":"2.5e3",' +
      '"ts":"2024-02-29T10:00:00Z","day":"0050-06-01","b":"AAECAw==","doc":{"x":12345678901234567890},"name":"any case"}';
    const bad = [
      '{"id":"b1","ts":"2024-02-30T00:00:00Z"}',
      '{"id":"b2","f":1e300}',
      '{"id":"b3","d":"0x10"}',
      '{"id":"b4","b":"A"}',
      '{"id":"b5","ts":100000000000000000000}',
      '{"id":"b6","doc":"\\ud800"}',
      '{"id":"b7","name":"x","NAME":"y"}',
      '{"id":"b8","amount":"123456789012345678.5"}',
    ];
    await env.core.publish(
      'events',
      [good, ...bad].map((data) => ({ data })),
    );
    await waitFor('the row and eight dead letters', async () => backlog('to-table') === 0 && backlog('dead-sub') === bad.length);
    expect(
      await sql(`SELECT id, big, ubig, amount::VARCHAR amount, f, d, ts::VARCHAR ts, day::VARCHAR "day", hex(b) b, doc::VARCHAR doc,
        "Name" AS name FROM exact`),
    ).toEqual([
      {
        id: 'g',
        big: 9007199254740993n,
        ubig: 18446744073709551615n,
        amount: '12345678901234.5678',
        f: 1.5,
        d: 2500,
        ts: '2024-02-29 10:00:00',
        day: '0050-06-01',
        b: '00010203',
        doc: '{"x":12345678901234567890}',
        name: 'any case',
      },
    ]);
    const errors = await deadLetterReasons(10);
    expect(errors).toEqual([
      'NAME: fields "name" and "NAME" both name the column "Name"',
      'amount: 123456789012345678.5 does not fit a DECIMAL(20,4) column (20 digits, 4 after the point)',
      'b: expected base64 bytes (standard alphabet, padded) for a BLOB column, got "A"',
      'd: expected a number for a DOUBLE column, got "0x10"',
      expect.stringMatching(/^data: message data is not valid JSON: a high surrogate escape/),
      'f: 1e+300 is out of range for a FLOAT column',
      'ts: 100000000000000000000 is out of range for a TIMESTAMP column',
      'ts: expected an ISO 8601 timestamp of a real date and time, or epoch microseconds for a TIMESTAMP column, got "2024-02-30T00:00:00Z"',
    ]);
  });

  it('a JSON number with more digits than a double holds goes into DECIMAL, VARCHAR and JSON columns as written, a DOUBLE as its double', async () => {
    await sql(
      `CREATE TABLE digits(id VARCHAR, a DECIMAL(38,2), b DECIMAL(38,18), d DOUBLE, s VARCHAR, doc JSON, big BIGINT, tags VARCHAR[])`,
    );
    await exportWithDeadLetters('p.main.digits', { useTableSchema: true });
    // A double holds 12345678901234568 and 1.2345678901234568: these were written so, and acked.
    const good =
      '{"id":"n","a":12345678901234567.89,"b":1.23456789012345678,"d":1.23456789012345678,"s":12345678901234567.89,' +
      '"doc":{"x":12345678901234567.89,"y":1.50}}';
    // Describing the last one's value for its refusal threw a TypeError (a bigint inside an object): the sink failed, not the message.
    await env.core.publish('events', [
      { data: good },
      { data: '{"id":"i","big":12345678901234567.5}' },
      { data: '{"id":"l","tags":{"a":9007199254740993}}' },
    ]);
    await waitFor('the row and two dead letters', async () => backlog('to-table') === 0 && backlog('dead-sub') === 2);
    expect(await sql('SELECT id, a::VARCHAR a, b::VARCHAR b, d, s, doc::VARCHAR doc FROM digits')).toEqual([
      {
        id: 'n',
        a: '12345678901234567.89',
        b: '1.234567890123456780',
        d: Number('1.23456789012345678'),
        s: '12345678901234567.89',
        doc: '{"x":12345678901234567.89,"y":1.5}',
      },
    ]);
    const errors = await deadLetterReasons(2);
    expect(errors).toEqual([
      'big: expected an integer for a BIGINT column, got 12345678901234567.5',
      'tags: expected an array for a VARCHAR[] column, got {"a":9007199254740993}',
    ]);
  });

  it('fills STRUCT entries named in any letter case, as columns are, also inside lists (dropUnknownFields had left them NULL)', async () => {
    await sql(`CREATE TABLE nested(id VARCHAR, addr STRUCT(city VARCHAR, "Zip Code" VARCHAR, geo STRUCT(lat DOUBLE)),
      lines STRUCT(sku VARCHAR, qty INTEGER)[])`);
    await exportWithDeadLetters('p.main.nested', { useTableSchema: true, dropUnknownFields: true });
    await env.core.publish('events', [
      { data: '{"id":"a","addr":{"City":"Lyon","zip code":"69001","GEO":{"Lat":45.76},"floor":3},"lines":[{"SKU":"x","Qty":2}]}' },
      { data: '{"id":"b","addr":{"city":"Nice","CITY":"Nice"}}' },
    ]);
    await waitFor('the row and the dead letter', async () => backlog('to-table') === 0 && backlog('dead-sub') === 1);
    expect(await sql('SELECT id, addr::VARCHAR addr, lines::VARCHAR lines FROM nested')).toEqual([
      {
        id: 'a',
        addr: "{'city': Lyon, 'Zip Code': 69001, 'geo': {'lat': 45.76}}",
        lines: "[{'sku': x, 'qty': 2}]",
      },
    ]);
    expect(await deadLetterReasons(1)).toEqual(['addr.CITY: fields "city" and "CITY" both name the entry "city"']);
  });

  it('a DECIMAL in exponent notation is scaled by its digits, not its exponent: a huge exponent fits or fails its message alone', async () => {
    await sql('CREATE TABLE amounts(id VARCHAR, amount DECIMAL(10,2))');
    await exportWithDeadLetters('p.main.amounts', { useTableSchema: true });
    // 10^1000000000 is past what a BigInt holds: the RangeError failed the sink, again on every retry.
    await env.core.publish('events', [
      { data: '{"id":"tiny","amount":"1e-1000000000"}' },
      { data: '{"id":"huge","amount":"-1e1000000000"}' },
      { data: '{"id":"zero","amount":"0e99999999999999999999"}' },
      { data: '{"id":"half","amount":"0.5e-2"}' },
      { data: '{"id":"edge","amount":"9.99999999e7"}' },
    ]);
    await waitFor('the rows and the dead letter', async () => backlog('to-table') === 0 && backlog('dead-sub') === 1);
    expect(await sql('SELECT id, amount::VARCHAR amount FROM amounts ORDER BY rowid')).toEqual([
      { id: 'tiny', amount: '0.00' },
      { id: 'zero', amount: '0.00' },
      { id: 'half', amount: '0.01' },
      { id: 'edge', amount: '99999999.90' },
    ]);
    expect(await deadLetterReasons(1)).toEqual([
      'amount: -1e1000000000 does not fit a DECIMAL(10,2) column (10 digits, 2 after the point)',
    ]);
  });

  it('a column added or renamed while exporting takes its fields from the next batch on, not dead-lettered as unknown', async () => {
    await sql('CREATE TABLE altered(id VARCHAR, a INTEGER)');
    await exportWithDeadLetters('p.main.altered', { useTableSchema: true });
    await env.core.publish('events', [{ data: '{"id":"1","a":1}' }]);
    await waitFor('the first row', async () => backlog('to-table') === 0);
    await sql('ALTER TABLE altered ADD COLUMN note VARCHAR; ALTER TABLE altered RENAME COLUMN a TO qty');
    await env.core.publish('events', [{ data: '{"id":"2","qty":2,"note":"n"}' }]);
    await waitFor('the second row', async () => backlog('to-table') === 0 && (await sql('SELECT count(*) n FROM altered'))[0]!.n === 2n);
    expect(await sql('SELECT * FROM altered ORDER BY rowid')).toEqual([
      { id: '1', qty: 1, note: null },
      { id: '2', qty: 2, note: 'n' },
    ]);
    expect(backlog('dead-sub')).toBe(0);
  });

  it("a renamed column takes the field of its new name, not the old one's (dropUnknownFields had left it silently wrong)", async () => {
    await sql('CREATE TABLE renamed(id VARCHAR, a INTEGER)');
    await exportWithDeadLetters('p.main.renamed', { useTableSchema: true, dropUnknownFields: true });
    await env.core.publish('events', [{ data: '{"id":"1","a":1}' }]);
    await waitFor('the first row', async () => backlog('to-table') === 0);
    // Same type: the appender has nothing to refuse.
    await sql('ALTER TABLE renamed RENAME COLUMN a TO qty');
    await env.core.publish('events', [{ data: '{"id":"2","a":99,"qty":2}' }]);
    await waitFor('the second row', async () => (await sql('SELECT count(*) n FROM renamed'))[0]!.n === 2n);
    expect(await sql('SELECT * FROM renamed ORDER BY rowid')).toEqual([
      { id: '1', qty: 1 },
      { id: '2', qty: 2 },
    ]);
  });

  it("takes BigQuery's TIME strings into a TIME column (every message setting one had failed), and refuses what is not a time of day", async () => {
    await sql('CREATE TABLE times(id VARCHAR, t TIME)');
    await exportWithDeadLetters('p.main.times', { useTableSchema: true });
    await env.core.publish(
      'events',
      [
        '{"id":"a","t":"08:30"}',
        '{"id":"b","t":"23:59:59.999999"}',
        '{"id":"c","t":" 00:00:01.1234567 "}',
        '{"id":"d","t":"24:00:00"}',
        '{"id":"e","t":"8:30"}',
        '{"id":"f","t":3600}',
      ].map((data) => ({ data })),
    );
    await waitFor('the rows and three dead letters', async () => backlog('to-table') === 0 && backlog('dead-sub') === 3);
    expect(await sql('SELECT id, t::VARCHAR t FROM times ORDER BY id')).toEqual([
      { id: 'a', t: '08:30:00' },
      { id: 'b', t: '23:59:59.999999' },
      { id: 'c', t: '00:00:01.123456' },
    ]);
    expect(await deadLetterReasons(3)).toEqual([
      't: expected a time of day (HH:MM[:SS[.ffffff]]) for a TIME column, got "24:00:00"',
      't: expected a time of day (HH:MM[:SS[.ffffff]]) for a TIME column, got "8:30"',
      't: expected a time of day (HH:MM[:SS[.ffffff]]) for a TIME column, got 3600',
    ]);
  });

  it('takes canonical UUID strings in any case into a UUID column and a list of them (every such message had failed), refusing other forms', async () => {
    await sql('CREATE TABLE ids(id VARCHAR, u UUID NOT NULL, us UUID[])');
    await exportWithDeadLetters('p.main.ids', { useTableSchema: true });
    const u = '0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d';
    await env.core.publish(
      'events',
      [
        { id: 'a', u },
        { id: 'b', u: u.toUpperCase(), us: [u, 'ffffffff-ffff-ffff-ffff-ffffffffffff', null] },
        { id: 'c', u: `{${u}}` },
        { id: 'd', u: u.replaceAll('-', '') },
        { id: 'e', u: 7 },
        { id: 'f', u: null },
        { id: 'g', u, us: [u, `${u}0`] },
      ].map((doc) => ({ data: JSON.stringify(doc) })),
    );
    await waitFor('the rows and five dead letters', async () => backlog('to-table') === 0 && backlog('dead-sub') === 5);
    expect(await sql('SELECT id, u::VARCHAR u, us::VARCHAR us FROM ids ORDER BY id')).toEqual([
      { id: 'a', u, us: null },
      { id: 'b', u, us: `[${u}, ffffffff-ffff-ffff-ffff-ffffffffffff, NULL]` },
    ]);
    expect(await deadLetterReasons(5)).toEqual([
      'u: column "u" is NOT NULL and the message has no value for it',
      'u: expected a UUID (8-4-4-4-12 hexadecimal digits) for a UUID column, got "0a1b2c3d4e5f4a6b8c7d9e0f1a2b3c4d"',
      'u: expected a UUID (8-4-4-4-12 hexadecimal digits) for a UUID column, got "{0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d}"',
      'u: expected a UUID (8-4-4-4-12 hexadecimal digits) for a UUID column, got 7',
      `us[1]: expected a UUID (8-4-4-4-12 hexadecimal digits) for a UUID column, got "${u}0"`,
    ]);
  });

  it('takes integers 0 to 2^128-1 into a UHUGEINT column, exactly, as numbers or strings (every such message had failed)', async () => {
    await sql('CREATE TABLE counters(id VARCHAR, n UHUGEINT)');
    await exportWithDeadLetters('p.main.counters', { useTableSchema: true });
    const max = (2n ** 128n - 1n).toString();
    await env.core.publish(
      'events',
      [
        '{"id":"a","n":0}',
        `{"id":"b","n":${max}}`,
        `{"id":"c","n":"${max}"}`,
        '{"id":"d","n":18446744073709551617}',
        '{"id":"e","n":-1}',
        `{"id":"f","n":"${2n ** 128n}"}`,
        '{"id":"g","n":1.5}',
      ].map((data) => ({ data })),
    );
    await waitFor('the rows and three dead letters', async () => backlog('to-table') === 0 && backlog('dead-sub') === 3);
    expect(await sql('SELECT id, n::VARCHAR n FROM counters ORDER BY id')).toEqual([
      { id: 'a', n: '0' },
      { id: 'b', n: max },
      { id: 'c', n: max },
      { id: 'd', n: '18446744073709551617' },
    ]);
    expect(await deadLetterReasons(3)).toEqual([
      `n: -1 is out of range for a UHUGEINT column (0 to ${max})`,
      `n: ${2n ** 128n} is out of range for a UHUGEINT column (0 to ${max})`,
      'n: expected an integer for a UHUGEINT column, got 1.5',
    ]);
  });

  it('takes timestamps into TIMESTAMP_S, _MS and _NS columns to their precision (every such message had failed), and refuses what is out of their range', async () => {
    await sql('CREATE TABLE instants(id VARCHAR, s TIMESTAMP_S, ms TIMESTAMP_MS, ns TIMESTAMP_NS)');
    await exportWithDeadLetters('p.main.instants', { useTableSchema: true });
    const all = (t: unknown) => ({ s: t, ms: t, ns: t });
    await env.core.publish(
      'events',
      [
        { id: 'a', ...all('2026-11-30T08:00:01.1234567891Z') },
        { id: 'b', ...all('1969-12-31T23:59:59.9999999Z') },
        { id: 'c', ...all('2026-11-30 10:00:01.5+02:00') },
        { id: 'd', ...all(1_500_001) },
        { id: 'e', ns: '2262-04-11T23:47:16.854775806Z' },
        { id: 'f', ns: '1677-09-21T23:59:59.999999999Z' },
        { id: 'g', ns: '2262-04-11T23:47:16.854775807Z' },
        { id: 'h', ms: '2026-02-30T00:00:00Z' },
        { id: 'i', s: '9999-12-31T23:59:59Z' },
      ].map((doc) => ({ data: JSON.stringify(doc) })),
    );
    await waitFor('the rows and three dead letters', async () => backlog('to-table') === 0 && backlog('dead-sub') === 3);
    expect(await sql('SELECT id, s::VARCHAR s, ms::VARCHAR ms, ns::VARCHAR ns FROM instants ORDER BY id')).toEqual([
      { id: 'a', s: '2026-11-30 08:00:01', ms: '2026-11-30 08:00:01.123', ns: '2026-11-30 08:00:01.123456789' },
      { id: 'b', s: '1969-12-31 23:59:59', ms: '1969-12-31 23:59:59.999', ns: '1969-12-31 23:59:59.9999999' },
      { id: 'c', s: '2026-11-30 08:00:01', ms: '2026-11-30 08:00:01.5', ns: '2026-11-30 08:00:01.5' },
      { id: 'd', s: '1970-01-01 00:00:01', ms: '1970-01-01 00:00:01.5', ns: '1970-01-01 00:00:01.500001' },
      { id: 'e', s: null, ms: null, ns: '2262-04-11 23:47:16.854775806' },
      { id: 'i', s: '9999-12-31 23:59:59', ms: null, ns: null },
    ]);
    expect(await deadLetterReasons(3)).toEqual([
      'ms: expected an ISO 8601 timestamp of a real date and time, or epoch microseconds for a TIMESTAMP_MS column, got "2026-02-30T00:00:00Z"',
      'ns: "1677-09-21T23:59:59.999999999Z" is out of range for a TIMESTAMP_NS column',
      'ns: "2262-04-11T23:47:16.854775807Z" is out of range for a TIMESTAMP_NS column',
    ]);
  });

  it('takes arrays of exactly N elements into a fixed-size ARRAY column, also inside a list (every such message had failed), naming N and the count otherwise', async () => {
    await sql('CREATE TABLE vectors(id VARCHAR, v INTEGER[3], pairs DOUBLE[2][])');
    await exportWithDeadLetters('p.main.vectors', { useTableSchema: true });
    await env.core.publish(
      'events',
      [
        { id: 'a', v: [1, 2, 3] },
        { id: 'b', v: [1, null, '3'], pairs: [[1.5, 2], null, [3, 4]] },
        { id: 'c', v: [1, 2] },
        { id: 'd', v: [1, 2, 3, 4] },
        { id: 'e', v: '1,2,3' },
        { id: 'f', pairs: [[1.5, 2], [1]] },
        { id: 'g', v: [1, 2, 'x'] },
      ].map((doc) => ({ data: JSON.stringify(doc) })),
    );
    await waitFor('the rows and five dead letters', async () => backlog('to-table') === 0 && backlog('dead-sub') === 5);
    expect(await sql('SELECT id, v::VARCHAR v, pairs::VARCHAR pairs FROM vectors ORDER BY id')).toEqual([
      { id: 'a', v: '[1, 2, 3]', pairs: null },
      { id: 'b', v: '[1, NULL, 3]', pairs: '[[1.5, 2.0], NULL, [3.0, 4.0]]' },
    ]);
    expect(await deadLetterReasons(5)).toEqual([
      'pairs[1]: a DOUBLE[2] column takes exactly 2 elements, got 1',
      'v: a INTEGER[3] column takes exactly 3 elements, got 2',
      'v: a INTEGER[3] column takes exactly 3 elements, got 4',
      'v: expected an array for a INTEGER[3] column, got "1,2,3"',
      'v[2]: expected an integer for a INTEGER column, got "x"',
    ]);
  });

  it("takes objects into MAP columns, keys converted to the key type, also inside a STRUCT (every such message had failed), refusing keys that are not the key type's", async () => {
    await sql('CREATE TABLE maps(id VARCHAR, tags MAP(VARCHAR, INTEGER), names MAP(INTEGER, VARCHAR), s STRUCT(m MAP(VARCHAR, UUID)))');
    await exportWithDeadLetters('p.main.maps', { useTableSchema: true });
    const u = '0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d';
    await env.core.publish(
      'events',
      [
        { id: 'a', tags: { x: 1, y: '2', z: null }, names: { '1': 'one', '-2': 'minus two' } },
        { id: 'b', tags: {}, s: { m: { k: u } } },
        { id: 'c', names: { '1.5': 'x' } },
        { id: 'd', names: { '1': 'a', '01': 'b' } },
        { id: 'e', tags: [1, 2] },
        { id: 'f', tags: { x: 'y' } },
        { id: 'g', names: { '99999999999': 'x' } },
        { id: 'h', s: { m: { k: 'not a uuid' } } },
      ].map((doc) => ({ data: JSON.stringify(doc) })),
    );
    await waitFor('the rows and six dead letters', async () => backlog('to-table') === 0 && backlog('dead-sub') === 6);
    expect(await sql('SELECT id, tags::VARCHAR tags, names::VARCHAR AS names, s::VARCHAR AS s FROM maps ORDER BY id')).toEqual([
      { id: 'a', tags: '{x=1, y=2, z=NULL}', names: '{1=one, -2=minus two}', s: null },
      { id: 'b', tags: '{}', names: null, s: `{'m': {k=${u}}}` },
    ]);
    expect(await deadLetterReasons(6)).toEqual([
      'names key "1.5": expected an integer for a INTEGER column, got "1.5"',
      'names key "99999999999": 99999999999 is out of range for a INTEGER column (-2147483648 to 2147483647)',
      'names: keys "1" and "01" are both the key 1',
      's.m["k"]: expected a UUID (8-4-4-4-12 hexadecimal digits) for a UUID column, got "not a uuid"',
      'tags: expected an object for a MAP(VARCHAR, INTEGER) column, got [1,2]',
      'tags["x"]: expected an integer for a INTEGER column, got "y"',
    ]);
  });

  it('a number with more digits than a double holds is not an object: it fails its message for a STRUCT column or as the data (dropUnknownFields had written NULLs)', async () => {
    await exportWithDeadLetters('p.main.orders', { useTableSchema: true, dropUnknownFields: true });
    await env.core.publish(
      'events',
      ['{"order_id":"a","address":1.00000000000000000001}', '1.00000000000000000001', '{"order_id":"ok"}'].map((data) => ({ data })),
    );
    await waitFor('a row and two dead letters', async () => backlog('to-table') === 0 && backlog('dead-sub') === 2);
    expect(await sql('SELECT order_id FROM orders')).toEqual([{ order_id: 'ok' }]);
    expect(await deadLetterReasons(2)).toEqual([
      'address: expected an object for a STRUCT("city" VARCHAR, "zip" VARCHAR) column, got 1.00000000000000000001',
      'data: message data must be a JSON object to map its fields to columns (useTableSchema)',
    ]);
  });

  it("refuses epoch microseconds before DuckDB's first timestamp, 290309-12-22 (BC), which had been stored and then could not be read back", async () => {
    await sql('CREATE TABLE early(id VARCHAR, t TIMESTAMP, ms TIMESTAMP_MS)');
    await exportWithDeadLetters('p.main.early', { useTableSchema: true });
    await env.core.publish(
      'events',
      [
        '{"id":"a","t":-9223372022400000000,"ms":-9223372022400000000}',
        '{"id":"b","t":-9223372022400000001}',
        '{"id":"c","ms":-9223372036854775000}',
      ].map((data) => ({ data })),
    );
    await waitFor('a row and two dead letters', async () => backlog('to-table') === 0 && backlog('dead-sub') === 2);
    expect(await sql('SELECT id, t::VARCHAR t, ms::VARCHAR ms FROM early')).toEqual([
      { id: 'a', t: '290309-12-22 (BC) 00:00:00', ms: '290309-12-22 (BC) 00:00:00' },
    ]);
    expect(await deadLetterReasons(2)).toEqual([
      'ms: -9223372036854775000 is out of range for a TIMESTAMP_MS column',
      't: -9223372022400000001 is out of range for a TIMESTAMP column',
    ]);
  });

  it('takes the values of an ENUM column, also in a list (every such message had failed), refusing any other string, case included', async () => {
    await sql("CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy'); CREATE TABLE moods(id VARCHAR, m mood, history mood[])");
    await exportWithDeadLetters('p.main.moods', { useTableSchema: true });
    await env.core.publish(
      'events',
      [
        { id: 'a', m: 'ok' },
        { id: 'b', history: ['sad', null, 'happy'] },
        { id: 'c', m: 'OK' },
        { id: 'd', m: 1 },
        { id: 'e', history: ['toString'] },
      ].map((doc) => ({ data: JSON.stringify(doc) })),
    );
    await waitFor('the rows and three dead letters', async () => backlog('to-table') === 0 && backlog('dead-sub') === 3);
    expect(await sql('SELECT id, m::VARCHAR m, history::VARCHAR history FROM moods ORDER BY id')).toEqual([
      { id: 'a', m: 'ok', history: null },
      { id: 'b', m: null, history: '[sad, NULL, happy]' },
    ]);
    expect(await deadLetterReasons(3)).toEqual([
      'history[0]: expected one of the ENUM column\'s 3 values ("sad", "ok", "happy"), got "toString"',
      'm: expected one of the ENUM column\'s 3 values ("sad", "ok", "happy"), got "OK"',
      'm: expected one of the ENUM column\'s 3 values ("sad", "ok", "happy"), got 1',
    ]);
  });

  it("fills a default the appender cannot (gen_random_uuid(), nextval) where a message leaves the column out: such a table's export had stalled", async () => {
    await sql(`CREATE SEQUENCE serial; CREATE TABLE generated(
      id UUID DEFAULT gen_random_uuid(), n BIGINT NOT NULL DEFAULT nextval('serial'), kind VARCHAR DEFAULT 'plain', name VARCHAR)`);
    await exportWithDeadLetters('p.main.generated', { useTableSchema: true });
    const given = '0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d';
    await env.core.publish(
      'events',
      [{ name: 'a' }, { name: 'b' }, { name: 'c', id: given, n: 100 }, { name: 'd' }].map((doc) => ({ data: JSON.stringify(doc) })),
    );
    await waitFor('the rows', async () => backlog('to-table') === 0);
    const rows = await sql('SELECT name, id::VARCHAR id, n, kind FROM generated ORDER BY name');
    expect(rows.map((r) => [r.name, r.kind])).toEqual([
      ['a', 'plain'],
      ['b', 'plain'],
      ['c', 'plain'],
      ['d', 'plain'],
    ]);
    expect(rows[2]).toMatchObject({ id: given, n: 100n });
    const generatedIds = [rows[0], rows[1], rows[3]].map((r) => r!.id);
    expect(new Set(generatedIds).size).toBe(3);
    for (const id of generatedIds) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(new Set([rows[0], rows[1], rows[3]].map((r) => r!.n))).toEqual(new Set([1n, 2n, 3n]));
    expect(backlog('dead-sub')).toBe(0);
  });

  it('bad JSON and unconvertible values fail only their message, with a reason naming the field', async () => {
    await exportWithDeadLetters('p.main.orders', { useTableSchema: true });
    await env.core.publish('events', [
      { data: '{not json', orderingKey: 'x' },
      { data: JSON.stringify({ order_id: 'y', qty: 3.5 }), orderingKey: 'y' },
      { data: JSON.stringify({ order_id: 'z', qty: 99999999999 }), orderingKey: 'z' },
      { data: JSON.stringify({ qty: 1 }), orderingKey: 'w' },
      { data: Buffer.concat([Buffer.from('{"order_id":"'), Buffer.from([0xff]), Buffer.from('","qty":1}')]), orderingKey: 'u' },
      { data: JSON.stringify({ order_id: 'ok', qty: 1 }), orderingKey: 'ok' },
    ]);
    await waitFor('five dead letters', async () => backlog('to-table') === 0 && backlog('dead-sub') === 5);
    expect(await sql('SELECT order_id FROM orders')).toEqual([{ order_id: 'ok' }]);
    const errors = await deadLetterReasons(10);
    expect(errors).toEqual([
      expect.stringMatching(/^data: message data is not valid JSON/),
      'data: message data is not valid UTF-8, so not JSON',
      'order_id: column "order_id" is NOT NULL and the message has no value for it',
      'qty: 99999999999 is out of range for a INTEGER column (-2147483648 to 2147483647)',
      'qty: expected an integer for a INTEGER column, got 3.5',
    ]);
  });
});

describe('sink state', () => {
  it('a missing table puts the subscription in NOT_FOUND, keeps the backlog, and recovers when it appears', async () => {
    await exportTo('p.main.later', { writeMetadata: true }, { deadLetterPolicy: { deadLetterTopic: 'dead' } });
    await env.core.publish('events', [
      { data: 'a1', orderingKey: 'a' },
      { data: 'a2', orderingKey: 'a' },
    ]);
    await waitFor('NOT_FOUND', () => env.core.getSubscription('to-table').state === 'NOT_FOUND');
    await new Promise((r) => setTimeout(r, 300)); // several retries, none may dead-letter
    expect(backlog('to-table')).toBe(2);
    expect(backlog('dead-sub')).toBe(0);
    await sql(
      `CREATE TABLE later(subscription_name VARCHAR, message_id VARCHAR, publish_time TIMESTAMP, data VARCHAR, attributes VARCHAR)`,
    );
    await waitFor('ACTIVE', async () => env.core.getSubscription('to-table').state === 'ACTIVE' && backlog('to-table') === 0);
    expect(await sql('SELECT data FROM later ORDER BY rowid')).toEqual([{ data: 'a1' }, { data: 'a2' }]);
  });

  it('a dataset named as the DuckDB file (export.duckdb: catalog and schema "export") is written, appended and CDC alike (every write had failed as an ambiguous reference)', async () => {
    await sql(`CREATE SCHEMA export.export; CREATE TABLE export.export.events(data VARCHAR);
      CREATE TABLE export.export.members(id INTEGER PRIMARY KEY, name VARCHAR)`);
    await exportTo('p.export.events', {});
    await env.core.createSubscription('to-members', {
      topic: 'events',
      bigqueryConfig: { table: 'p.export.members', useTableSchema: true },
    });
    await env.exports.sync();
    await env.core.publish('events', [{ data: '{"id":1,"name":"Ann","_CHANGE_TYPE":"UPSERT"}', orderingKey: 'a' }]);
    await env.core.publish('events', [{ data: '{"id":1,"name":"Bo","_CHANGE_TYPE":"UPSERT"}', orderingKey: 'a' }]);
    await waitFor('both written', () => backlog('to-table') === 0 && backlog('to-members') === 0);
    expect(await sql('SELECT data FROM export.export.events ORDER BY rowid')).toEqual([
      { data: '{"id":1,"name":"Ann","_CHANGE_TYPE":"UPSERT"}' },
      { data: '{"id":1,"name":"Bo","_CHANGE_TYPE":"UPSERT"}' },
    ]);
    expect(await sql('SELECT id, name FROM export.export.members')).toEqual([{ id: 1, name: 'Bo' }]);
  });

  it('writeMetadata takes a TIMESTAMPTZ publish_time, and a metadata column of a type it cannot fill is SCHEMA_MISMATCH naming it', async () => {
    await sql(`CREATE TABLE tz(subscription_name VARCHAR, message_id VARCHAR, publish_time TIMESTAMPTZ, data VARCHAR, attributes JSON);
      CREATE TABLE wrong(subscription_name VARCHAR, message_id BIGINT, publish_time TIMESTAMP, data VARCHAR, attributes VARCHAR)`);
    await exportTo('p.main.tz', { writeMetadata: true });
    await env.core.createSubscription('to-wrong', { topic: 'events', bigqueryConfig: { table: 'p.main.wrong', writeMetadata: true } });
    await env.exports.sync();
    const before = Date.now();
    await env.core.publish('events', [{ data: 'x' }]);
    await waitFor('the row', () => backlog('to-table') === 0);
    const [row] = await sql('SELECT data, epoch_ms(publish_time) AS ms FROM tz');
    expect(row!.data).toBe('x');
    expect(Number(row!.ms)).toBeGreaterThanOrEqual(before - 1000);
    await waitFor('SCHEMA_MISMATCH', () => env.core.getSubscription('to-wrong').state === 'SCHEMA_MISMATCH');
    expect(env.exports.runner('to-wrong')!.stats.stateReason).toBe(
      'table p.main.wrong: column message_id is BIGINT; writeMetadata writes VARCHAR',
    );
    expect(backlog('to-wrong')).toBe(1);
  });

  it('a table without the metadata columns is SCHEMA_MISMATCH', async () => {
    await sql('CREATE TABLE thin(data VARCHAR)');
    await exportTo('p.main.thin', { writeMetadata: true });
    await env.core.publish('events', [{ data: 'x' }]);
    await waitFor('SCHEMA_MISMATCH', () => env.core.getSubscription('to-table').state === 'SCHEMA_MISMATCH');
    expect(backlog('to-table')).toBe(1);
  });
});

describe('CDC (_CHANGE_TYPE, _CHANGE_SEQUENCE_NUMBER)', () => {
  it("reads the key's last version from the table, so a change another subscription's writer applied since counts", async () => {
    await sql('CREATE TABLE shipments(id VARCHAR PRIMARY KEY, status VARCHAR)');
    await exportTo('p.main.shipments', { useTableSchema: true });
    await env.core.createTopic('more-events');
    await env.core.createSubscription('to-table-too', {
      topic: 'more-events',
      bigqueryConfig: { table: 'p.main.shipments', useTableSchema: true },
    });
    await env.exports.sync();
    const change = (status: string, seq: string) => ({
      data: JSON.stringify({ id: 's1', status, _CHANGE_TYPE: 'UPSERT', _CHANGE_SEQUENCE_NUMBER: seq }),
    });
    // Both writers are open (each had loaded the table) before either change.
    await env.core.publish('events', [change('shipped', '5')]);
    await waitFor('the first change', () => backlog('to-table') === 0);
    await env.core.publish('more-events', [change('paid', '3')]);
    await waitFor('the second change', () => backlog('to-table-too') === 0);
    expect(await sql('SELECT id, status FROM shipments')).toEqual([{ id: 's1', status: 'shipped' }]);
  });

  it('compares a key as its column holds it: 1 and "1" are one INTEGER key, so the older change is ignored', async () => {
    await sql('CREATE TABLE accounts(id INTEGER PRIMARY KEY, status VARCHAR)');
    await exportTo('p.main.accounts', { useTableSchema: true });
    await env.core.publish('events', [
      { data: '{"id":1,"status":"shipped","_CHANGE_TYPE":"UPSERT","_CHANGE_SEQUENCE_NUMBER":"5"}', orderingKey: 'a' },
    ]);
    await waitFor('the first change', () => backlog('to-table') === 0);
    await env.core.publish('events', [
      { data: '{"id":"1","status":"paid","_CHANGE_TYPE":"UPSERT","_CHANGE_SEQUENCE_NUMBER":"3"}', orderingKey: 'a' },
    ]);
    await waitFor('the second change', () => backlog('to-table') === 0);
    expect(await sql('SELECT id, status FROM accounts')).toEqual([{ id: 1, status: 'shipped' }]);
  });

  it('a DELETE needs only the key, and an UPSERT of an existing row may leave out its NOT NULL columns', async () => {
    await sql('CREATE TABLE members(id INTEGER PRIMARY KEY, name VARCHAR NOT NULL, visits INTEGER)');
    await exportWithDeadLetters('p.main.members', { useTableSchema: true });
    const change = (id: number, type: string, rest: Record<string, unknown> = {}) => ({
      data: JSON.stringify({ id, _CHANGE_TYPE: type, ...rest }),
      orderingKey: String(id),
    });
    await env.core.publish('events', [change(1, 'UPSERT', { name: 'Ann', visits: 1 }), change(2, 'UPSERT', { name: 'Bob', visits: 1 })]);
    await waitFor('the rows', () => backlog('to-table') === 0);
    await env.core.publish('events', [
      change(1, 'DELETE'),
      change(2, 'UPSERT', { visits: 2 }),
      change(3, 'UPSERT', { visits: 1 }), // a new row without a name: the table refuses it
      change(4, 'UPSERT', { name: null, visits: 1 }),
    ]);
    await waitFor('the changes and two dead letters', () => backlog('to-table') === 0 && backlog('dead-sub') === 2);
    expect(await sql('SELECT id, name, visits FROM members ORDER BY id')).toEqual([{ id: 2, name: 'Bob', visits: 2 }]);
    expect(await deadLetterReasons(2)).toEqual([
      'name: column "name" is NOT NULL and the message has no value for it',
      'table p.main.members refused the row: Constraint Error: NOT NULL constraint failed: members.name',
    ]);
  });

  it('takes _CHANGE_TYPE and _CHANGE_SEQUENCE_NUMBER in any letter case, as columns are, even with dropUnknownFields', async () => {
    await sql('CREATE TABLE pets(id INTEGER PRIMARY KEY, name VARCHAR)');
    await exportWithDeadLetters('p.main.pets', { useTableSchema: true, dropUnknownFields: true });
    await env.core.publish('events', [
      { data: '{"id":1,"name":"Rex","_CHANGE_TYPE":"UPSERT"}', orderingKey: '1' },
      { data: '{"id":2,"name":"Tom","_CHANGE_TYPE":"UPSERT"}', orderingKey: '2' },
    ]);
    await waitFor('the rows', () => backlog('to-table') === 0);
    await env.core.publish('events', [
      { data: '{"id":2,"_change_type":"DELETE"}', orderingKey: '2' },
      { data: '{"id":3,"_Change_Type":"DELETE"}', orderingKey: '3' }, // no row: nothing to delete, nothing inserted
      { data: '{"id":1,"name":"Max","_change_type":"UPSERT","_change_sequence_number":"5"}', orderingKey: '1' },
      { data: '{"id":1,"name":"stale","_CHANGE_TYPE":"UPSERT","_CHANGE_SEQUENCE_NUMBER":"3"}', orderingKey: '1' },
      { data: '{"id":4,"name":"Two","_CHANGE_TYPE":"UPSERT","_change_type":"DELETE"}', orderingKey: '4' },
    ]);
    await waitFor('the changes and a dead letter', () => backlog('to-table') === 0 && backlog('dead-sub') === 1);
    expect(await sql('SELECT id, name FROM pets ORDER BY id')).toEqual([{ id: 1, name: 'Max' }]);
    expect(await deadLetterReasons(1)).toEqual(['_change_type: fields "_CHANGE_TYPE" and "_change_type" both name _CHANGE_TYPE']);
  });

  it('takes a JSON null _CHANGE_SEQUENCE_NUMBER or _CHANGE_TYPE as no value, as the topic schema path does', async () => {
    await sql('CREATE TABLE cities(id INTEGER PRIMARY KEY, name VARCHAR)');
    await exportWithDeadLetters('p.main.cities', { useTableSchema: true });
    await env.core.publish('events', [
      { data: '{"id":1,"name":"Oslo","_CHANGE_TYPE":"UPSERT","_CHANGE_SEQUENCE_NUMBER":"2"}', orderingKey: '1' },
      { data: '{"id":2,"name":"Rome","_CHANGE_TYPE":"UPSERT"}', orderingKey: '2' },
    ]);
    await waitFor('the rows', () => backlog('to-table') === 0);
    await env.core.publish('events', [
      // No sequence number: applied whatever the row's last one was.
      { data: '{"id":1,"name":"Bergen","_CHANGE_TYPE":"UPSERT","_CHANGE_SEQUENCE_NUMBER":null}', orderingKey: '1' },
      { data: '{"id":2,"_CHANGE_TYPE":"DELETE","_CHANGE_SEQUENCE_NUMBER":null}', orderingKey: '2' },
      // No change type: a plain row.
      { data: '{"id":3,"name":"Lima","_CHANGE_TYPE":null}', orderingKey: '3' },
      // Two spellings of one CDC field stay ambiguous, whichever is null.
      { data: '{"id":4,"name":"Nice","_CHANGE_TYPE":null,"_change_type":"UPSERT"}', orderingKey: '4' },
    ]);
    await waitFor('the changes and a dead letter', () => backlog('to-table') === 0 && backlog('dead-sub') === 1);
    expect(await sql('SELECT id, name FROM cities ORDER BY id')).toEqual([
      { id: 1, name: 'Bergen' },
      { id: 3, name: 'Lima' },
    ]);
    expect(await deadLetterReasons(1)).toEqual(['_change_type: fields "_CHANGE_TYPE" and "_change_type" both name _CHANGE_TYPE']);
  });

  it("applies a batch's plain rows and changes in their order: a row, then a DELETE of it, leaves no row", async () => {
    await sql('CREATE TABLE parcels(id INTEGER PRIMARY KEY, status VARCHAR)');
    await exportTo('p.main.parcels', { useTableSchema: true });
    // One batch: the DELETE ran while the plain rows before it were still in the appender, which wrote
    // them after it, so the deleted row stayed; and an UPSERT before a plain row of its key broke the key.
    await env.core.publish('events', [
      { data: '{"id":1,"status":"new"}', orderingKey: '1' },
      { data: '{"id":1,"_CHANGE_TYPE":"DELETE"}', orderingKey: '1' },
      { data: '{"id":2,"status":"new"}', orderingKey: '2' },
      { data: '{"id":2,"status":"sent","_CHANGE_TYPE":"UPSERT"}', orderingKey: '2' },
    ]);
    await waitFor('the batch', () => backlog('to-table') === 0);
    expect(await sql('SELECT id, status FROM parcels ORDER BY id')).toEqual([{ id: 2, status: 'sent' }]);
  });

  it('applies UPSERT and DELETE against the primary key in per-key order, ignoring stale changes', async () => {
    await sql('CREATE TABLE customers(id VARCHAR PRIMARY KEY, name VARCHAR, tier INTEGER)');
    await exportTo('p.main.customers', { useTableSchema: true });
    const change = (id: string, type: string, seq: string, rest: Record<string, unknown> = {}) => ({
      data: JSON.stringify({ id, _CHANGE_TYPE: type, _CHANGE_SEQUENCE_NUMBER: seq, ...rest }),
      orderingKey: id,
    });
    await env.core.publish('events', [
      change('c1', 'UPSERT', '1', { name: 'Ann', tier: 1 }),
      change('c2', 'UPSERT', '1', { name: 'Bob', tier: 1 }),
      change('c1', 'UPSERT', '2', { name: 'Ann', tier: 2 }),
      change('c2', 'DELETE', '2'),
      change('c1', 'UPSERT', '1/F', { name: 'stale', tier: 0 }), // older than 2: ignored
      change('c3', 'UPSERT', 'A', { name: 'Cy', tier: 3 }),
    ]);
    await waitFor('changes', () => backlog('to-table') === 0);
    expect(await sql('SELECT id, name, tier FROM customers ORDER BY id')).toEqual([
      { id: 'c1', name: 'Ann', tier: 2 },
      { id: 'c3', name: 'Cy', tier: 3 },
    ]);
    // A later batch, as if applied change by change: the deleted key comes back; a replayed version is
    // ignored; an UPSERT sets only the columns it has; an existing row deleted and upserted again in the
    // same batch loses its old values.
    await env.core.publish('events', [
      change('c2', 'UPSERT', '3', { name: 'Bob again', tier: 5 }),
      change('c3', 'UPSERT', 'A', { name: 'replayed', tier: 0 }),
      change('c1', 'UPSERT', '3', { tier: 7 }),
      change('c1', 'UPSERT', '4', { name: 'Ann B' }),
      change('c3', 'DELETE', 'B'),
      change('c3', 'UPSERT', 'C', { name: 'Cy again' }),
      change('c4', 'DELETE', '1'),
      change('c4', 'UPSERT', '2', { name: 'Dee', tier: 4 }),
    ]);
    await waitFor('second batch', () => backlog('to-table') === 0);
    expect(await sql('SELECT id, name, tier FROM customers ORDER BY id')).toEqual([
      { id: 'c1', name: 'Ann B', tier: 7 },
      { id: 'c2', name: 'Bob again', tier: 5 },
      { id: 'c3', name: 'Cy again', tier: null },
      { id: 'c4', name: 'Dee', tier: 4 },
    ]);
    // 14 changes, 2 of them stale; no row appended (they counted as 14 rows appended).
    const row = statusOf(env.core, env.exports).find((r) => r.subscription.endsWith('/to-table'))!;
    expect(row.exportCounters).toEqual({ rowsAppended: 0, changesApplied: 12 });
  });
});

describe('a seek back on an ordered subscription', () => {
  it("writes a key's messages the table never had below its last written one, each once, also after a restart", async () => {
    // Batches of at most two messages: the replay of k's first three comes in pieces.
    await env.close();
    env = await openExport(dir.path, {}, { runner: { maxBatchMessages: 2 } });
    // Topic retention: a seek back replays what was published before the subscription existed.
    await env.core.updateTopic('events', { messageRetentionDuration: '600s' });
    await env.core.publish(
      'events',
      [1, 2, 3].map((i) => ({ data: `before-${i}`, orderingKey: 'k' })),
    );
    await sql(`CREATE TABLE ev(subscription_name VARCHAR, message_id VARCHAR, publish_time TIMESTAMP, data VARCHAR,
      attributes JSON, ordering_key VARCHAR, sequence BIGINT)`);
    await exportTo('p.main.ev', { writeMetadata: true });
    await env.core.publish(
      'events',
      [4, 5, 6].map((i) => ({ data: `after-${i}`, orderingKey: 'k' })),
    );
    const rows = async () => (await sql('SELECT data FROM ev ORDER BY sequence')).map((r) => r.data);
    await waitFor('the messages published since the subscription', async () => (await rows()).length === 3);
    await waitFor('their acks', () => backlog('to-table') === 0);

    // Read as "1 to the last written", the seek's before-1..3 were taken for written and acked without rows.
    await env.core.seek('to-table', 0);
    const all = ['before-1', 'before-2', 'before-3', 'after-4', 'after-5', 'after-6'];
    await waitFor('the replay written', async () => (await rows()).length >= 6 && backlog('to-table') === 0);
    expect(await rows()).toEqual(all);

    // The ranges written are what a restart reads: another seek back writes nothing twice.
    await env.close();
    env = await openExport(dir.path);
    await env.core.seek('to-table', 0);
    await waitFor('the second replay acked', () => env.core.metrics('to-table').counters.delivered >= 6 && backlog('to-table') === 0);
    expect(await rows()).toEqual(all);
  });
});

describe('written ids of unkeyed messages', () => {
  it('are kept while a redelivery is possible and forgotten after messageRetentionDuration', async () => {
    await sql('CREATE TABLE loose(data VARCHAR)');
    let now = Date.now();
    const writer = new DuckDbTableWriter(
      parseDuckDbTableConfig({ table: 'p.main.loose' }),
      writerContext(
        'loose',
        { dataDir: dir.path },
        { spec: { enableMessageOrdering: false, messageRetentionDuration: 600 }, budget: { messages: 1, bytes: 1 } },
      ),
      env.duckdbPath,
      () => now,
    );
    await writer.open();
    const message = (id: string, publishTime: Date) => ({
      id,
      deliveryAttempt: 0,
      message: { messageId: id, publishTime, data: Buffer.from(id), attributes: {}, orderingKey: '', sequence: 0 },
    });
    // A write's rows commit in the background: what it wrote is reported by the next call (here the flush).
    const written = async (batch: ReturnType<typeof message>[]) => [
      ...(await writer.write(batch)).written,
      ...(await writer.flush('all')).written,
    ];
    const old = new Date(now);
    expect(await written([message('1', old), message('2', old)])).toEqual(['1', '2']);
    // A redelivery within retention is recognised and not written again.
    expect(await written([message('2', old)])).toEqual(['2']);
    expect(await sql('SELECT count(*)::INT AS n FROM loose')).toEqual([{ n: 2 }]);
    now += 11 * 60_000; // past the 10-minute retention of messages 1 and 2
    await written([message('3', new Date(now))]);
    expect(await sql(`SELECT message_id FROM _orderly_export_written_ids ORDER BY message_id`)).toEqual([{ message_id: '3' }]);
    await writer.close();
  });
});

describe('pipelined commits (a batch commits in the background while the next one is handed over)', () => {
  const openWriter = async (table: string) => {
    const writer = new DuckDbTableWriter(
      parseDuckDbTableConfig({ table: `p.main.${table}` }),
      writerContext(table, { dataDir: dir.path }),
      env.duckdbPath,
    );
    await writer.open();
    return writer;
  };
  const all = (results: WriteResult[], field: 'written' | 'deferred') => results.flatMap((r) => r[field]);

  it('a row the table refused leaves no rows in a dropped appender to abort a later transaction when it is garbage collected', async () => {
    await sql(`CREATE TABLE checked(data VARCHAR CHECK (data <> 'a2'))`);
    const writer = await openWriter('checked');
    // Collect garbage right after every BEGIN: an appender that still held rows flushed them into that
    // transaction, which then failed ("Current transaction is aborted") and put the export in RESOURCE_ERROR.
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const connection = (writer as unknown as { connection: { run: (sql: string, ...rest: unknown[]) => Promise<unknown> } }).connection;
    const run = connection.run.bind(connection);
    connection.run = async (sql: string, ...rest: unknown[]) => {
      const result = await run(sql, ...rest);
      if (sql === 'BEGIN TRANSACTION') {
        gc();
        // Native finalizers run in a later task.
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      return result;
    };
    const results = [
      await writer.write([keyedExportMessage('a', 1), keyedExportMessage('a', 2), keyedExportMessage('b', 1)]),
      await writer.write([keyedExportMessage('b', 2), keyedExportMessage('c', 1)]),
      await writer.flush('all'),
    ];
    await writer.close();
    expect(all(results, 'written').sort()).toEqual(['a-1', 'b-1', 'b-2', 'c-1']);
    expect(await sql('SELECT data FROM checked ORDER BY data')).toEqual([{ data: 'a1' }, { data: 'b1' }, { data: 'b2' }, { data: 'c1' }]);
  });

  it("a message that fails to map does not hold back its key's earlier messages when the table refuses another key's row", async () => {
    await sql(`CREATE TABLE checked(data VARCHAR CHECK (data <> 'b1'))`);
    const writer = await openWriter('checked');
    const notUtf8 = keyedExportMessage('a', 2);
    notUtf8.message.data = Buffer.from([0xff]);
    // b1's refusal makes the writer commit one message at a time; a1 comes before a2's failure.
    const results = [await writer.write([keyedExportMessage('a', 1), notUtf8, keyedExportMessage('b', 1)]), await writer.flush('all')];
    await writer.close();
    expect(all(results, 'written')).toEqual(['a-1']);
    expect(results.flatMap((r) => r.failed.map((f) => f.id)).sort()).toEqual(['a-2', 'b-1']);
    expect(all(results, 'deferred')).toEqual([]);
  });

  it('a key whose row the table refused in the background commit has its messages of the next batch deferred', async () => {
    await sql(`CREATE TABLE checked(data VARCHAR CHECK (data <> 'a2'))`);
    const writer = await openWriter('checked');
    const results = [
      await writer.write([keyedExportMessage('a', 1), keyedExportMessage('a', 2), keyedExportMessage('b', 1)]),
      // Handed over while a2's batch commits: a3 must not be written after a2 failed.
      await writer.write([keyedExportMessage('a', 3), keyedExportMessage('b', 2)]),
      await writer.flush('all'),
    ];
    await writer.close();
    expect(all(results, 'written').sort()).toEqual(['a-1', 'b-1', 'b-2']);
    expect(results.flatMap((r) => r.failed.map((f) => f.id))).toEqual(['a-2']);
    expect(all(results, 'deferred')).toEqual(['a-3']);
    expect(await sql('SELECT data FROM checked ORDER BY data')).toEqual([{ data: 'a1' }, { data: 'b1' }, { data: 'b2' }]);
  });

  it('a batch whose background commit found the table gone is committed first, once the table is back', async () => {
    await sql('CREATE TABLE flaky(data VARCHAR)');
    const writer = await openWriter('flaky');
    await sql('DROP TABLE flaky');
    const first = await writer.write([keyedExportMessage('k', 1)]); // reports nothing yet: it commits in the background
    await expect(writer.write([keyedExportMessage('k', 2)])).rejects.toThrow(SinkStateError);
    await sql('CREATE TABLE flaky(data VARCHAR)');
    // The runner retries the call that failed, with the same batch.
    const results = [first, await writer.write([keyedExportMessage('k', 2)]), await writer.flush('all')];
    await writer.close();
    expect(all(results, 'written')).toEqual(['k-1', 'k-2']);
    expect(await sql('SELECT data FROM flaky ORDER BY rowid')).toEqual([{ data: 'k1' }, { data: 'k2' }]);
  });
});

describe('writers opening together', () => {
  it("several subscriptions' writers opening at once on a new database file all open (no catalog write-write conflict)", async () => {
    for (let round = 0; round < 5; round++) {
      const path = join(dir.path, `fresh-${round}.duckdb`);
      const tables = ['a', 'b', 'c', 'd'];
      for (const t of tables) await queryDuckDb(path, `CREATE TABLE ${t}(data VARCHAR)`);
      const writers = tables.map(
        (t) =>
          new DuckDbTableWriter(
            parseDuckDbTableConfig({ table: `p.main.${t}` }),
            writerContext(`${t}-${round}`, { dataDir: dir.path }),
            path,
          ),
      );
      const opened = await Promise.allSettled(writers.map((w) => w.open()));
      expect(opened.filter((o) => o.status === 'rejected').map((o) => String(o.reason))).toEqual([]);
      for (const w of writers) await w.close();
      await closeDuckDb(path);
    }
  });
});

describe('the database file among other catalogs', () => {
  it("reads the target table's columns and key from the file's catalog, not a same-named table in another", async () => {
    // The export database is attached to an in-memory one (src/duckdb/database.ts), which a query may also write to.
    await sql('CREATE TABLE memory.main.orders(id INTEGER PRIMARY KEY, note VARCHAR, extra INTEGER)');
    await sql('CREATE TABLE orders(data VARCHAR)');
    await exportTo('p.main.orders', {});
    await env.core.publish('events', [{ data: 'one', orderingKey: 'k' }]);
    await waitFor('the row', async () => Number((await sql('SELECT count(*) n FROM orders'))[0]!.n) === 1);
    expect(await sql('SELECT data FROM orders')).toEqual([{ data: 'one' }]);
  });
});

describe('analytics while exporting', () => {
  it('a second connection queries the table while the writer appends', async () => {
    // Through the package's entry point, as docs/connectors.md tells a user to (it was not exported there).
    const live = (q: string) => publicQueryDuckDb(env.duckdbPath, q);
    await sql('CREATE TABLE live(data VARCHAR)');
    await exportTo('p.main.live', {});
    const counts: number[] = [];
    for (let i = 0; i < 10; i++) {
      await env.core.publish(
        'events',
        Array.from({ length: 100 }, (_, j) => ({ data: `${i}-${j}`, orderingKey: `k${j % 7}` })),
      );
      counts.push(Number((await live('SELECT count(*) n FROM live'))[0]!.n));
    }
    await waitFor('all rows', async () => Number((await live('SELECT count(*) n FROM live'))[0]!.n) === 1000);
    expect(counts.every((c, i) => i === 0 || c >= counts[i - 1]!)).toBe(true);
  });
});

describe('one writing process per database file', () => {
  /** Every holder this test started: killed after it, also when it failed before killing them itself. */
  const holders: ChildProcess[] = [];
  afterEach(() => {
    for (const holder of holders.splice(0)) holder.kill('SIGKILL');
  });

  /**
   * Another process that opens the DuckDB file at `path` and holds it until killed. The instance is kept
   * referenced: a garbage collection of an unreferenced one closes the database and drops its lock (the
   * standby tests then found the file free and timed out waiting for the standby, once in CI). The
   * collection it forces (and the turns its finalizers run in) before saying `held` makes an unreferenced
   * instance certain to show, rather than left to when V8 happens to collect.
   */
  async function holdInAnotherProcess(path: string) {
    const holder = spawn(
      process.execPath,
      [
        '--expose-gc',
        '-e',
        `import('@duckdb/node-api').then(async ({ DuckDBInstance }) => {
          globalThis.held = await DuckDBInstance.create(${JSON.stringify(path)});
          setInterval(() => {}, 1000);
          setTimeout(() => {
            globalThis.gc();
            setTimeout(() => console.log('held'), 50);
          });
        })`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    holders.push(holder);
    let said = '';
    holder.stdout.setEncoding('utf8').on('data', (chunk: string) => (said += chunk));
    await waitFor(
      () => `the other process to hold ${path} (it said ${JSON.stringify(said)})`,
      () => said.includes('held\n'),
    );
    return holder;
  }

  /** What the runner's status says, for a failure to show what it waited on. */
  const standbyOf = (runner: { stats: object }) => () => `the standby (the export's status: ${inspect(runner.stats)})`;

  it('a standby that takes the file over runs the init statements, which could not run while another process held it', async () => {
    const path = join(dir.path, 'held.duckdb');
    const holder = await holdInAnotherProcess(path);
    const section = duckdbTableConnector.settings!;
    const opened = await section.open!(
      { path, init: ['CREATE TABLE IF NOT EXISTS late(data VARCHAR)'] },
      { dataDir: dir.path, readOnly: false, logger: createLogger({ level: 'silent' }) },
    );
    const writer = new DuckDbTableWriter(
      parseDuckDbTableConfig({ table: 'p.main.late' }),
      writerContext('late', { dataDir: dir.path, ...opened.settings }),
      path,
    );
    await expect(writer.open()).rejects.toThrow(/^standby: DuckDB database .* is open in another process/);
    holder.kill('SIGKILL');
    await once(holder, 'exit');
    await writer.open();
    const result = await writer.write([keyedExportMessage('k', 1)]);
    result.written.push(...(await writer.flush('all')).written);
    expect(result.written).toEqual(['k-1']);
    await writer.close();
    expect(await queryDuckDb(path, 'SELECT count(*) AS n FROM late')).toEqual([{ n: 1n }]);
    await closeDuckDb(path);
  });

  it('status shows a standby while another process holds the file, and then what stops the export once it took the file over', async () => {
    const holder = await holdInAnotherProcess(env.duckdbPath);
    await exportTo('p.main.nowhere', {});
    const runner = env.exports.runner('to-table')!;
    await waitFor(standbyOf(runner), () => runner.stats.standby !== undefined);
    expect(runner.stats.standby).toMatch(/^standby: DuckDB database .* is open in another process/);
    holder.kill('SIGKILL');
    await once(holder, 'exit');
    // Taken over: the table is missing. Status says so, and no longer that another process holds the file.
    await waitFor('NOT_FOUND', () => runner.stats.state === 'NOT_FOUND');
    expect(runner.stats.standby).toBeUndefined();
  });

  it("a job's status and metrics say its export waits for the file another process holds (it showed ACTIVE, the backlog growing)", async () => {
    const holder = await holdInAnotherProcess(env.duckdbPath);
    await exportTo('p.main.nowhere', {});
    const runner = env.exports.runner('to-table')!;
    await waitFor(standbyOf(runner), () => runner.stats.standby !== undefined);
    const row = statusOf(env.core, env.exports).find((s) => s.subscription.endsWith('/to-table'))!;
    expect(row.standby).toMatch(/^standby: DuckDB database .* is open in another process \(pid \d+\)/);
    const metrics = await serveMetrics(env.core, env.exports, '127.0.0.1', 0);
    try {
      const text = await (await fetch(`${metrics.url}/metrics`)).text();
      expect(text).toContain('# TYPE orderly_export_standby gauge');
      expect(text).toContain('orderly_export_standby{subscription="to-table"} 1');
    } finally {
      await metrics.close();
    }
    holder.kill('SIGKILL');
    await once(holder, 'exit');
  });

  it('while the writer exports (checking the file after every write), another process cannot open the file', async () => {
    // Regression: the header check opened and closed the file, which drops DuckDB's POSIX lock on it.
    await sql('CREATE TABLE events(data VARCHAR)');
    await exportTo('p.main.events', {});
    await env.core.publish('events', [{ data: 'a', orderingKey: 'k' }]);
    await waitFor('the row', async () => Number((await sql('SELECT count(*) n FROM events'))[0]!.n) === 1);
    const script = `import('@duckdb/node-api').then(({ DuckDBInstance }) => DuckDBInstance.create(${JSON.stringify(env.duckdbPath)}))
      .then(() => console.log('opened'), (e) => console.log(e.message))`;
    const { stdout } = await promisify(execFile)(process.execPath, ['-e', script], { cwd: process.cwd() });
    expect(stdout).toMatch(/Could not set lock on file .*Conflicting lock is held/);
  });
});
