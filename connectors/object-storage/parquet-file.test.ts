import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { PubsubMessage } from '../../src/core/message.js';
import { tempDir } from '../../test/helpers/temp-dir.js';
import { ParquetFile, parquetColumns, readParquetRows } from './parquet-file.js';
import { acquireParquetScratch } from './parquet-scratch.js';

const dir = tempDir();
const scratch = acquireParquetScratch(dir.path);
afterAll(async () => {
  await scratch.release();
  dir.remove();
});

const SUBSCRIPTION = 'projects/p/subscriptions/s';

function message(i: number, bytes: number): PubsubMessage {
  return {
    messageId: `m-${i}`,
    publishTime: new Date(1_700_000_000_000 + i),
    data: Buffer.alloc(bytes, i % 251),
    attributes: { n: String(i) },
    orderingKey: `käy-${i % 7}`,
    sequence: Math.floor(i / 7) + 1,
  };
}

async function write(path: string, writeMetadata: boolean, messages: PubsubMessage[]): Promise<void> {
  const file = await ParquetFile.create(scratch, path, writeMetadata, 'SNAPPY');
  for (const m of messages) await file.append(SUBSCRIPTION, m, writeMetadata ? JSON.stringify(m.attributes) : '');
  await file.close();
}

// Read back with hyparquet, a reader independent of the DuckDB that wrote them; more rows than a DuckDB vector.
describe('a Parquet file', () => {
  it('holds every row, in append order, each column as appended', async () => {
    const messages = Array.from({ length: 5000 }, (_, i) => message(i, 1 + (i % 900)));
    const path = join(dir.path, 'metadata.parquet');
    await write(path, true, messages);
    const rows = await readParquetRows(readFileSync(path));
    expect(rows).toHaveLength(messages.length);
    // The columns an object export's query view gives before its first object.
    expect(Object.keys(rows[0]!)).toEqual(parquetColumns(true).map(([name]) => name));
    rows.forEach((r, i) => {
      const m = messages[i]!;
      expect(r.subscription_name).toBe(SUBSCRIPTION);
      expect(r.message_id).toBe(m.messageId);
      expect(r.publish_time).toEqual(m.publishTime);
      expect(JSON.parse(r.attributes as string)).toEqual(m.attributes);
      expect(Buffer.from(r.data as Uint8Array).equals(m.data)).toBe(true);
      expect(r.ordering_key).toBe(m.orderingKey);
      expect(Number(r.sequence)).toBe(m.sequence);
    });
  });

  it('holds the data alone without metadata', async () => {
    const messages = Array.from({ length: 3000 }, (_, i) => message(i, 700));
    const path = join(dir.path, 'data.parquet');
    await write(path, false, messages);
    const rows = await readParquetRows(readFileSync(path));
    expect(rows.map((r) => Object.keys(r))).toEqual(messages.map(() => ['data']));
    expect(rows.every((r, i) => Buffer.from(r.data as Uint8Array).equals(messages[i]!.data))).toBe(true);
  });

  it('holds payloads, keys and attributes of any bytes, empty ones and one larger than a CSV line may be by default', async () => {
    const awkward = [
      '',
      ',',
      '\t',
      'a\tb',
      '\n',
      '\r\n',
      '\r',
      '"',
      "'",
      '\\',
      '\\N',
      '\\x41',
      'NULL',
      'a,b\n"c"',
      '🦆 käy',
      '\u0000',
      '\u007f\u0001',
    ];
    const messages: PubsubMessage[] = awkward.map((text, i) => ({
      messageId: String(i + 1),
      publishTime: new Date(1_700_000_000_000 + i),
      data: Buffer.from(text),
      attributes: { [text || 'empty']: text },
      orderingKey: text,
      sequence: i,
    }));
    messages.push(...oddPayloads().map((data, i) => ({ ...message(100 + i, 0), data, orderingKey: '\t\\x00' })));
    // DuckDB reads CSV lines of up to 2 MiB unless told otherwise.
    messages.push({ ...message(99, 3 * 1024 * 1024), orderingKey: ',\n' });
    const path = join(dir.path, 'awkward.parquet');
    await write(path, true, messages);
    const rows = await readParquetRows(readFileSync(path));
    expect(
      rows.map((r) => [
        r.message_id,
        Buffer.from(r.data as Uint8Array).toString('hex'),
        r.ordering_key,
        JSON.parse(r.attributes as string),
      ]),
    ).toEqual(messages.map((m) => [m.messageId, m.data.toString('hex'), m.orderingKey, m.attributes]));
  });

  it('holds payloads of any bytes without metadata', async () => {
    const messages = oddPayloads().map((data, i) => ({ ...message(i, 0), data }));
    const path = join(dir.path, 'odd-data.parquet');
    await write(path, false, messages);
    const rows = await readParquetRows(readFileSync(path));
    expect(rows.map((r) => Buffer.from(r.data as Uint8Array).toString('hex'))).toEqual(messages.map((m) => m.data.toString('hex')));
  });
});

/**
 * Payloads whose bytes a staged row could take for its own (parquet-file.ts stages rows in a CSV file):
 * not UTF-8, every byte value, a tab, CR, LF or backslash among plain bytes, mostly plain or mostly high
 * bytes, and ones larger than a chunk of the staged file and than a CSV line DuckDB reads by default.
 */
function oddPayloads(): Buffer[] {
  const every = Buffer.from(Array.from({ length: 256 }, (_, b) => b));
  const sprinkled = (bytes: number, every: number, odd: number) =>
    Buffer.from(Array.from({ length: bytes }, (_, i) => (i % every === every - 1 ? odd : 0x61 + (i % 26))));
  return [
    Buffer.from([0xff]),
    Buffer.from([0xc3]),
    Buffer.from([0x80, 0x41]),
    Buffer.from([0xed, 0xa0, 0x80]),
    Buffer.from('\u0000\u0000'),
    every,
    Buffer.concat([every, every].reverse()),
    Buffer.from('{"a":"b\\"c","d":"\\u00e9"}'),
    sprinkled(1500, 16, 0x09),
    sprinkled(1500, 16, 0x5c),
    sprinkled(1500, 16, 0x0d),
    sprinkled(3 * 1024 * 1024, 16, 0xff),
    sprinkled(1024 * 1024 + 7, 2, 0x0a),
  ];
}
