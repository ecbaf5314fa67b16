import avro from 'avsc';
import { PutObjectCommand, S3Client, type ServiceInputTypes, type ServiceOutputTypes } from '@aws-sdk/client-s3';
import type { FinalizeRequestMiddleware } from '@smithy/types';
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, sep } from 'node:path';
import { crc32 } from 'node:zlib';
import { createHash } from 'node:crypto';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { queryDuckDb } from '../../src/duckdb/database.js';
import { closedPort } from '../../test/helpers/closed-port.js';
import { tempDir } from '../../test/helpers/temp-dir.js';
import { openExport } from '../../test/helpers/export.js';
import { waitFor } from '../../test/helpers/wait-for.js';
import { startTestS3, type TestS3 } from '../../test/helpers/s3.js';
import { exportTargetOf } from '../../src/job/export-target.js';
import { auditObjects, auditSubscription } from './audit.js';
import { parseObjectStorageConfig } from './config.js';
import { parquetView } from './query-view.js';
import { Manifest } from './manifest.js';
import { ManifestReader } from './manifest-reader.js';
import { newWriterTag, objectNamer, uniqueId } from './object-naming.js';
import { ObjectStorageWriter } from './object-writer.js';
import { openRecordFile, readRecords } from './record-format.js';
import { bodySha256, createS3Client, s3Connection } from './s3-client.js';
import { keyedExportMessage, writerContext } from '../../test/helpers/writer-context.js';

let s3: TestS3;
beforeAll(async () => {
  s3 = await startTestS3();
});
afterAll(async () => s3.close());

/** The unique part of a name: the file counter (16 digits) and the writer's tag. */
const UNIQUE = '\\d{16}-[0-9a-f]{12}';
const at = new Date(Date.UTC(2023, 8, 25, 4, 10, 0));

/** Uploads the manifest says were started and never committed nor discarded, read as the writer reads them at open. */
function unfinishedUploads(path: string): ReturnType<Manifest['unfinished']> {
  const manifest = new Manifest(path);
  try {
    return manifest.unfinished();
  } finally {
    manifest.close();
  }
}

describe('the manifest file', () => {
  it('appends that overlap are written whole and in call order, and an append after one resolved is written too', async () => {
    const dir = tempDir();
    const path = join(dir.path, 'manifest.jsonl');
    const manifest = new Manifest(path);
    await Promise.all(Array.from({ length: 20 }, (_, i) => manifest.markPending(`o${i}`, i + 1)));
    await manifest.discard('o0');
    manifest.close();
    const lines = readFileSync(path, 'utf8').trimEnd().split('\n');
    expect(lines.map((l) => (JSON.parse(l) as { object: string }).object)).toEqual([
      ...Array.from({ length: 20 }, (_, i) => `o${i}`),
      'o0',
    ]);
    const reopened = new Manifest(path);
    expect(reopened.unfinished()).toHaveLength(19);
    expect(reopened.lastCounter()).toBe(20);
    reopened.close();
    dir.remove();
  });
});

describe('the S3 client', () => {
  /** Sends one upload of `body`; the headers it was signed with, and whether it was stored. */
  async function upload(
    endpoint: string,
    bucket: string,
    body: Buffer,
    checksumSha256?: string,
  ): Promise<{ headers: Record<string, string>; error?: unknown }> {
    const client = createS3Client({ ...s3Connection(s3.settings), endpoint });
    const sent: Record<string, string>[] = [];
    const capture: FinalizeRequestMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next) => (args) => {
      sent.push({ ...(args.request as { headers: Record<string, string> }).headers });
      return next(args);
    };
    client.middlewareStack.addRelativeTo(capture, { name: 'testCapture', relation: 'after', toMiddleware: 'httpSigningMiddleware' });
    try {
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: 'o', Body: body, ChecksumSHA256: checksumSha256 }));
      return { headers: sent[0]! };
    } catch (error) {
      return { headers: sent[0]!, error };
    } finally {
      client.destroy();
    }
  }
  const body = Buffer.from('hello\n'.repeat(1000));
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));

  it('over plain HTTP, signs an upload with the SHA-256 of its body (a CRC32 alone is easily forged); the object arrives whole', async () => {
    const bucket = await s3.bucket();
    const { headers, error } = await upload(s3.settings.endpoint, bucket, body);
    expect(error).toBeUndefined();
    expect(headers['x-amz-content-sha256']).toBe(createHash('sha256').update(body).digest('hex'));
    expect(await s3.get(bucket, 'o')).toEqual(body);
  });

  it('over HTTPS, signs an upload that carries a CRC32 without hashing its body, the checksum itself signed', async () => {
    // No TLS server here: the request is seen as signed, then its connection fails.
    const { headers, error } = await upload(`https://127.0.0.1:${await closedPort()}`, 'b', body);
    expect(error).toBeDefined();
    expect(headers).toMatchObject({ 'x-amz-checksum-crc32': crc.toString('base64'), 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' });
    expect(headers.authorization).toContain('x-amz-checksum-crc32');
  });

  const sha256 = createHash('sha256').update(body).digest();

  it("hashes a body for its checksum off the event loop (the SHA-256 WebCrypto computes is the body's)", async () => {
    expect(await bodySha256(body)).toBe(sha256.toString('base64'));
    expect(await bodySha256(body.subarray(6, 12))).toBe(createHash('sha256').update(body.subarray(6, 12)).digest('base64'));
  });

  it('takes the payload hash it signs from the checksum given, rather than hashing the body again', async () => {
    const other = createHash('sha256').update('another body').digest();
    const { headers } = await upload(`https://127.0.0.1:${await closedPort()}`, 'b', body, other.toString('base64'));
    expect(headers['x-amz-content-sha256']).toBe(other.toString('hex'));
    const plain = await upload(`http://127.0.0.1:${await closedPort()}`, 'b', body, other.toString('base64'));
    expect(plain.headers['x-amz-content-sha256']).toBe(other.toString('hex'));
  });

  it.each([
    ['plain HTTP', () => s3.settings.endpoint],
    ['HTTPS', async () => `https://127.0.0.1:${await closedPort()}`],
  ])('over %s, signs an upload that carries its SHA-256 with that hash, and adds no checksum of its own', async (transport, endpoint) => {
    const https = transport === 'HTTPS';
    const bucket = https ? 'b' : await s3.bucket();
    const { headers, error } = await upload(await endpoint(), bucket, body, sha256.toString('base64'));
    expect(headers).toMatchObject({ 'x-amz-checksum-sha256': sha256.toString('base64'), 'x-amz-content-sha256': sha256.toString('hex') });
    expect(headers.authorization).toContain('x-amz-checksum-sha256');
    expect(Object.keys(headers).filter((h) => h.startsWith('x-amz-checksum-'))).toEqual(['x-amz-checksum-sha256']);
    if (https)
      expect(error).toBeDefined(); // no TLS server here: the request is seen as signed, then its connection fails
    else {
      expect(error).toBeUndefined();
      expect(await s3.get(bucket, 'o')).toEqual(body);
    }
  });
});

describe('object names (filenameDatetimeFormat)', () => {
  it.each([
    ['', '', undefined, `^2023-09-25T04:10:00\\+00:00_${UNIQUE}$`],
    ['prod_', '_archive', 'YYYY-MM-DD/hh_mm_ssZ', `^prod_2023-09-25/04_10_00Z_${UNIQUE}_archive$`],
    ['raw/', '.txt', 'YYMMDDhhmmss/', `^raw/230925041000/${UNIQUE}\\.txt$`],
    ['p-', '', 'YYYY_MM_DDThh:mm:ss-', `^p-2023_09_25T04:10:00-${UNIQUE}$`],
  ])('prefix %j suffix %j format %j', (prefix, suffix, format, pattern) => {
    const name = objectNamer(prefix, suffix, format ?? 'YYYY-MM-DDThh:mm:ss+00:00').name(at, uniqueId(7, newWriterTag()));
    expect(name).toMatch(new RegExp(pattern));
  });

  it.each<[Record<string, unknown>, string]>([
    [{ filenameDatetimeFormat: 'YYYY-MM-DD hh:mm:ss' }, 'unexpected " " at position 10'],
    [{ filenameDatetimeFormat: 'YYYY-MM-DDThh:mm' }, 'ss must appear exactly once'],
    [{ filenameDatetimeFormat: 'YYYY-YY-MM-DDhhmmss' }, 'YYYY or YY must appear exactly once'],
    [{ filenameDatetimeFormat: 'YYYYMMDDhhmmssZ+00:00' }, 'use Z or +00:00, not both'],
    [{ filenameSuffix: 'x/' }, 'cloudStorageConfig.filenameSuffix: must not end in "/"'],
    [{ filenamePrefix: '../escape/' }, 'cloudStorageConfig.filenamePrefix: must not contain "." or ".." path segments'],
    [{ filenamePrefix: '/abs/' }, 'must not start with "/"'],
    // An empty path segment: MinIO and the embedded S3 server refuse the names, so every upload failed, forever.
    [{ filenamePrefix: 'a//b/' }, 'cloudStorageConfig.filenamePrefix: must not contain "//" (an empty path segment), got "a//b/"'],
    [{ filenameSuffix: '.x//y' }, 'cloudStorageConfig.filenameSuffix: must not contain "//" (an empty path segment)'],
    [
      { filenamePrefix: 'p/', filenameDatetimeFormat: '/YYYY-MM-DD/hh_mm_ss' },
      'cloudStorageConfig.filenameDatetimeFormat: "/YYYY-MM-DD/hh_mm_ss" after the prefix "p/" makes object names with "//" (an empty path segment), e.g. "p//1970-01-01/00_00_00_',
    ],
    [{ filenameDatetimeFormat: 'YYYY//MM-DD/hh_mm_ss' }, 'makes object names with "//"'],
    [{ filenameDatetimeFormat: '/YYYY-MM-DD/hh_mm_ss' }, 'after the prefix "" makes object names that start with "/"'],
    // The prefix alone was checked: with the datetime's "/" it still put data objects in Orderly's own folder.
    [
      { filenamePrefix: '_orderly', filenameDatetimeFormat: '/YYYY-MM-DD/hh_mm_ss' },
      'cloudStorageConfig.filenameDatetimeFormat: "/YYYY-MM-DD/hh_mm_ss" after the prefix "_orderly" makes object names that start with "_orderly/" (Orderly keeps fleet manifests there), e.g. "_orderly/1970-01-01/00_00_00_',
    ],
    [{ maxDuration: '30s' }, 'cloudStorageConfig.maxDuration: must be between 60s and 600s, got 30s'],
    [{ maxDuration: '11m' }, 'got 660s'],
    [{ maxBytes: 999 }, 'cloudStorageConfig.maxBytes: must be an integer between 1000'],
    [
      { maxMessages: 999 },
      'cloudStorageConfig.maxMessages: must be an integer between 1000 and 2^63 - 1 (past 2^53 - 1 as a string of digits: a number that large is not exact), got 999',
    ],
    // A job file's 9223372036854775807 reaches here as 2^63 (YAML reads a number); as digits it is exact.
    [
      { maxMessages: 2 ** 63 },
      'cloudStorageConfig.maxMessages: must be an integer between 1000 and 2^63 - 1 (past 2^53 - 1 as a string of digits: a number that large is not exact), got 9223372036854776000',
    ],
    [{ maxMessages: '9223372036854775808' }, 'got "9223372036854775808"'],
    [{ textConfig: {}, avroConfig: {} }, 'only one of textConfig, avroConfig, parquetConfig'],
    [{ parquetConfig: { compression: 'LZ4' } }, 'must be UNCOMPRESSED, GZIP or SNAPPY'],
    [{ colour: 1 }, 'cloudStorageConfig.colour: unknown field'],
    // Each format's section is checked whole: a typo or a wrong type used to fall back to the default silently.
    [{ parquetConfig: { writeMetdata: true } }, 'cloudStorageConfig.parquetConfig.writeMetdata: unknown field'],
    [{ parquetConfig: { writeMetadata: 'yes' } }, 'cloudStorageConfig.parquetConfig.writeMetadata: must be true or false, got "yes"'],
    [{ parquetConfig: 'x' }, 'cloudStorageConfig.parquetConfig: must be an object, got "x"'],
    [{ textConfig: { foo: 1 } }, 'cloudStorageConfig.textConfig.foo: unknown field (this object has none)'],
    [{ textConfig: 'bogus' }, 'cloudStorageConfig.textConfig: must be an object, got "bogus"'],
    [{ avroConfig: 'x' }, 'cloudStorageConfig.avroConfig: must be an object, got "x"'],
    [{ avroConfig: { writeMetadata: 1 } }, 'cloudStorageConfig.avroConfig.writeMetadata: must be true or false, got 1'],
    [{ maxBytes: [5000] }, 'cloudStorageConfig.maxBytes: must be an integer between 1000'],
    [
      { maxMessages: '0x3e8' },
      'cloudStorageConfig.maxMessages: must be an integer between 1000 and 2^63 - 1 (past 2^53 - 1 as a string of digits: a number that large is not exact), got "0x3e8"',
    ],
    [{ shards: true }, 'cloudStorageConfig.shards: must be an integer between 1 and 64, got true'],
    [{ bucket: undefined }, 'cloudStorageConfig.bucket: is required: the bucket to write to'],
    [
      { serviceAccountEmail: 'not an email' },
      'cloudStorageConfig.serviceAccountEmail: must be a service account email, got "not an email"',
    ],
    // Object names hold at most 1024 bytes: 25 of the default datetime, a separator and 29 of the unique id.
    [{ filenamePrefix: `${'p'.repeat(970)}/` }, 'cloudStorageConfig.filenamePrefix: makes object names of 1026 bytes'],
    [{ filenameSuffix: `.${'é'.repeat(485)}` }, 'cloudStorageConfig.filenameSuffix: makes object names of 1026 bytes'],
  ])('rejects %j', (extra, message) => {
    expect(() => parseObjectStorageConfig({ bucket: 'my-bucket', ...extra })).toThrow(message);
  });

  it('takes a prefix that makes object names of exactly 1024 bytes', () => {
    expect(parseObjectStorageConfig({ bucket: 'my-bucket', filenamePrefix: `${'p'.repeat(968)}/` }).filenamePrefix).toHaveLength(969);
  });

  it('takes int64 fields as numbers or as the digit strings of Pub/Sub JSON, and each format section as written', () => {
    expect(parseObjectStorageConfig({ bucket: 'my-bucket', maxBytes: '5000', maxMessages: 2000 })).toMatchObject({
      maxBytes: 5000,
      maxMessages: 2000,
    });
    expect(parseObjectStorageConfig({ bucket: 'my-bucket', parquetConfig: { writeMetadata: true, compression: 'GZIP' } }).format).toEqual({
      kind: 'parquet',
      writeMetadata: true,
      compression: 'GZIP',
    });
    expect(parseObjectStorageConfig({ bucket: 'my-bucket', textConfig: {} }).format).toEqual({ kind: 'text' });
  });
});

describe('export to S3 (real HTTP server)', () => {
  let dir: ReturnType<typeof tempDir>;
  let env: Awaited<ReturnType<typeof openExport>>;
  beforeEach(async () => {
    dir = tempDir();
    env = await openExport(dir.path, { objectStorage: s3.settings });
    await env.core.createTopic('events');
  });
  afterEach(async () => {
    await env.close();
    dir.remove();
  });

  // s3rver stores a "+" in an object key as a space, so these tests name objects with "Z" rather than
  // Pub/Sub's default "+00:00" (which real MinIO and S3 store as is; the naming unit tests cover it).
  const Z_FORMAT = 'YYYY-MM-DDThh:mm:ssZ';
  async function exportTo(bucket: string, cloudStorageConfig: Record<string, unknown>, extra: Record<string, unknown> = {}) {
    await env.core.createSubscription('to-s3', {
      topic: 'events',
      enableMessageOrdering: true,
      cloudStorageConfig: { bucket, filenameDatetimeFormat: Z_FORMAT, ...cloudStorageConfig },
      ...extra,
    });
    await env.exports.sync();
  }
  const keyed = (n: number, keys: number, size = 0) =>
    Array.from({ length: n }, (_, i) => ({ data: `k${i % keys}-${Math.floor(i / keys)}${'.'.repeat(size)}`, orderingKey: `k${i % keys}` }));
  /** Waits until every published message is held by the writer, then stops it: open files are finalized. */
  async function finish(count: number) {
    await waitFor(
      'deliveries',
      () => (env.exports.runner('to-s3')?.outstanding ?? 0) + (env.exports.runner('to-s3')?.stats.written ?? 0) >= count,
    );
    await env.exports.stop();
  }

  it('text: one record per line, each key in publish order, named <prefix><datetime>_<id><suffix>', async () => {
    const bucket = await s3.bucket();
    await exportTo(bucket, { filenamePrefix: 'orders/', filenameSuffix: '.txt', textConfig: {} });
    await env.core.publish('events', keyed(30, 3));
    await finish(30);
    const names = await s3.list(bucket);
    expect(names).toHaveLength(1);
    expect(names[0]).toMatch(new RegExp(`^orders/\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}Z_${UNIQUE}\\.txt$`));
    const lines = (await s3.get(bucket, names[0]!)).toString().trim().split('\n');
    for (const k of ['k0', 'k1', 'k2'])
      expect(lines.filter((l) => l.startsWith(`${k}-`))).toEqual(Array.from({ length: 10 }, (_, i) => `${k}-${i}`));
    expect(env.core.metrics('to-s3').backlogMessages).toBe(0);
  });

  it('text: records that overflow the write chunk, and one larger than it, keep their bytes and order', async () => {
    const bucket = await s3.bucket();
    await exportTo(bucket, { textConfig: {} });
    // 4.2 MiB of 300 KB records (the two 1 MiB chunks take turns several times), a 1.2 MiB one (larger than a
    // chunk), more 300 KB ones, then small ones; each record its own letter, so a chunk reused too early shows.
    const records = (from: number, n: number) => Array.from({ length: n }, (_, i) => String.fromCharCode(65 + from + i).repeat(300_000));
    const data = [...records(0, 14), 'L'.repeat(1_200_000), ...records(14, 5), 'x', 'y'];
    await env.core.publish(
      'events',
      data.map((d) => ({ data: d, orderingKey: 'k' })),
    );
    await finish(data.length);
    const [name] = await s3.list(bucket);
    expect((await s3.get(bucket, name!)).toString()).toBe(data.map((d) => `${d}\n`).join(''));
  });

  it('text: appends that fill chunk after chunk without waiting write each chunk whole, in order (a chunk is reused only once written)', async () => {
    const dir = tempDir();
    const path = join(dir.path, 'records.txt');
    const file = await openRecordFile(path, { kind: 'text' });
    // 300 KB records, and at 20 one larger than a chunk (written straight to the file, after what is pending).
    const data = Array.from({ length: 40 }, (_, i) => Buffer.alloc(i === 20 ? 1_200_000 : 300_000, 65 + i));
    for (const [i, d] of data.entries()) {
      // As the object writer does: it waits only when the append says so; every third append also lets
      // the loop turn (a write may finish, and the next full chunk is then swapped without waiting).
      const waiting = file.append('s', { ...keyedExportMessage('k', i + 1).message, data: d });
      if (waiting) await waiting;
      if (i % 3 === 2) await new Promise((resolve) => setImmediate(resolve));
    }
    await file.close();
    expect(readFileSync(path).equals(Buffer.concat(data.flatMap((d) => [d, Buffer.from('\n')])))).toBe(true);
    dir.remove();
  });

  it('text: a chunk write that fails in the background fails the next append or the close (ENOSPC: /dev/full)', async () => {
    const file = await openRecordFile('/dev/full', { kind: 'text' });
    const fill = async () => {
      for (let i = 1; i <= 10; i++) {
        const waiting = file.append('s', { ...keyedExportMessage('k', i).message, data: Buffer.alloc(300_000, 65) });
        if (waiting) await waiting;
      }
      await file.close();
    };
    await expect(fill()).rejects.toThrow(/ENOSPC/);
    await file.close().catch(() => undefined); // closes the handle if an append threw first
  });

  it('avro with metadata: Pub/Sub record layout plus ordering_key and sequence', async () => {
    const bucket = await s3.bucket();
    await exportTo(bucket, { avroConfig: { writeMetadata: true } });
    await env.core.publish('events', [
      { data: 'a', orderingKey: 'k', attributes: { x: '1' } },
      { data: 'b', orderingKey: 'k' },
      { data: 'c' },
    ]);
    await finish(3);
    const [name] = await s3.list(bucket);
    const body = await s3.get(bucket, name!);
    // The file's own schema, as any reader sees it: publish_time is a timestamp, as in Pub/Sub's layout.
    const schema = await new Promise<{ fields: { name: string; type: unknown }[] }>((resolve, reject) => {
      const decoder = new avro.streams.BlockDecoder({
        parseHook: (s) => {
          resolve(s as never);
          return avro.Type.forSchema(s);
        },
      });
      decoder.on('error', reject).resume().end(body);
    });
    expect(schema.fields.find((f) => f.name === 'publish_time')!.type).toEqual({ type: 'long', logicalType: 'timestamp-micros' });
    const records = await readRecords(body, { kind: 'avro', writeMetadata: true });
    expect(records.map((r) => [r.data.toString(), r.orderingKey, r.sequence])).toEqual([
      ['a', 'k', 1],
      ['b', 'k', 2],
      ['c', '', 1],
    ]);
    expect(records[0]!.attributes).toEqual({ x: '1', orderingKey: 'k' });
    expect(records[0]!.messageId).toMatch(/^\d+$/);
    expect(records[0]!.publishTimeMicros! / 1000).toBeCloseTo(Date.now(), -5);
  });

  it('parquet with metadata: read back directly and through DuckDB read_parquet', async () => {
    const bucket = await s3.bucket();
    await exportTo(bucket, { parquetConfig: { writeMetadata: true } });
    await env.core.publish('events', keyed(200, 7));
    await finish(200);
    const [name] = await s3.list(bucket);
    const body = await s3.get(bucket, name!);
    const records = await readRecords(body, { kind: 'parquet', writeMetadata: true, compression: 'SNAPPY' });
    expect(records).toHaveLength(200);
    const file = join(dir.path, 'copy.parquet');
    writeFileSync(file, body);
    const rows = await queryDuckDb(
      join(dir.path, 'q.duckdb'),
      `SELECT ordering_key, list(sequence ORDER BY file_row_number) AS seqs
      FROM read_parquet('${file}', file_row_number = true) GROUP BY ordering_key ORDER BY ordering_key`,
    );
    expect(rows).toHaveLength(7);
    for (const r of rows) {
      const seqs = (r.seqs as { items: bigint[] }).items.map(Number);
      expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => i + 1));
    }
  });

  it('parquet: a file that cannot be written once sealed (its spill folder gone) fails the connector, which reopens; every message arrives once', async () => {
    const bucket = await s3.bucket();
    await exportTo(bucket, { maxMessages: 1000, parquetConfig: { writeMetadata: true } });
    const runner = env.exports.runner('to-s3')!;
    const messages = keyed(2000, 3);
    await env.core.publish('events', messages.slice(0, 999));
    await waitFor('the first file filling', () => runner.outstanding === 999 && runner.stats.batches > 0);
    const spill = readdirSync(dir.path, { recursive: true, encoding: 'utf8' }).find((p) => p.endsWith(`${sep}spill`))!;
    rmSync(join(dir.path, spill), { recursive: true });
    // The 1000th message seals the file: it closes (DuckDB's COPY into the missing folder) in the background.
    await env.core.publish('events', messages.slice(999, 1999));
    await env.core.publish('events', messages.slice(1999));
    await waitFor('the failed close, seen by the connector', () => runner.stats.errors > 0);
    expect(runner.stats.lastError?.message).toContain(spill);
    await waitFor('every message written by the reopened connector', () => runner.stats.written === 2000);
    const seen = new Map<string, number[]>();
    for (const name of (await s3.list(bucket)).sort()) {
      const records = await readRecords(await s3.get(bucket, name), { kind: 'parquet', writeMetadata: true, compression: 'SNAPPY' });
      for (const r of records) seen.set(r.orderingKey!, [...(seen.get(r.orderingKey!) ?? []), r.sequence!]);
    }
    expect([...seen.values()].flat()).toHaveLength(2000);
    for (const sequences of seen.values()) expect(sequences).toEqual(Array.from({ length: sequences.length }, (_, i) => i + 1));
  });

  it('a seek while the open file holds the messages it brings again writes each once, in order (the copies find the file committed)', async () => {
    const bucket = await s3.bucket();
    await exportTo(bucket, { textConfig: {} });
    await env.core.createSnapshot('before', { subscription: 'to-s3' });
    await env.core.publish('events', keyed(6, 2));
    const runner = env.exports.runner('to-s3')!;
    await waitFor('the open file to hold all six', () => runner.outstanding === 6);
    await env.core.seekToSnapshot('to-s3', 'before');
    await waitFor('the copies acked', () => env.core.metrics('to-s3').backlogMessages === 0);
    await env.exports.stop();
    const lines: string[] = [];
    for (const name of await s3.list(bucket)) lines.push(...(await s3.get(bucket, name)).toString().trim().split('\n'));
    expect(lines.filter((l) => l.startsWith('k0-'))).toEqual(['k0-0', 'k0-1', 'k0-2']);
    expect(lines.filter((l) => l.startsWith('k1-'))).toEqual(['k1-0', 'k1-1', 'k1-2']);
  });

  it('a seek that brings messages the export never had, while the open file holds later ones of their key, writes each once and every file in order', async () => {
    // Deliveries of at most two messages of a key: the replay's first batch holds no copy of what the file holds.
    await env.close();
    env = await openExport(dir.path, { objectStorage: s3.settings }, { runner: { maxBatchMessages: 2 } });
    // Topic retention: a seek back replays what was published before the subscription existed.
    await env.core.updateTopic('events', { messageRetentionDuration: '600s' });
    const bucket = await s3.bucket();
    await env.core.publish('events', keyed(2, 1));
    await exportTo(bucket, { textConfig: {} });
    await env.core.publish('events', keyed(5, 1).slice(2));
    const runner = env.exports.runner('to-s3')!;
    await waitFor('the open file to hold k0-2..k0-4', () => runner.outstanding === 3);
    // Each seek replays k0-0..k0-4; the replay is through once all five came and what is unacked is held.
    const replayed = (delivered: number) => () => {
      const m = env.core.metrics('to-s3');
      return m.counters.delivered >= delivered && m.backlogMessages === runner.outstanding;
    };
    // k0-0 and k0-1 come before k0-2..k0-4, which the open file holds: they must not follow them there.
    await env.core.seek('to-s3', 0);
    await waitFor('the first replay', replayed(8));
    // Again: what the first seek had written is found in the manifest, not written a second time.
    await env.core.seek('to-s3', 0);
    await waitFor('the second replay', replayed(13));
    await env.exports.stop();
    const files: string[][] = [];
    for (const name of await s3.list(bucket)) files.push((await s3.get(bucket, name)).toString().trim().split('\n'));
    expect(files.flat().sort()).toEqual(['k0-0', 'k0-1', 'k0-2', 'k0-3', 'k0-4']);
    for (const lines of files) expect(lines).toEqual([...lines].sort());
  });

  it.each([
    ['text', { textConfig: {} }],
    ['Avro with metadata', { avroConfig: { writeMetadata: true } }],
  ])('%s: the audit of a filtered subscription counts no gap its filter left in a key as missing', async (_, format) => {
    const bucket = await s3.bucket();
    await exportTo(bucket, format, { filter: 'attributes.region = "eu"' });
    // Sequences 1..6 of k0; the filter takes 1, 3 and 5, so the objects hold those alone.
    await env.core.publish(
      'events',
      keyed(6, 1).map((m, i) => ({ ...m, attributes: { region: i % 2 ? 'us' : 'eu' } })),
    );
    await finish(3);
    const found = exportTargetOf(env.core, { dataDir: dir.path, objectStorage: s3.settings }, env.core.getSubscription('to-s3'))!;
    const audit = await found.factory.audit!(found.target);
    expect(audit.report).toMatchObject({ records: 3, missing: { count: 0 }, duplicates: { count: 0 }, objectErrors: { count: 0 } });
    expect(audit.summary).toContain('the filter refused those messages');
  });

  it('rolls on maxMessages, and one large message may exceed maxBytes', async () => {
    const bucket = await s3.bucket();
    await exportTo(bucket, { maxMessages: 1000 });
    await env.core.publish('events', keyed(1000, 10));
    await env.core.publish(
      'events',
      keyed(1000, 10).map((m) => ({ ...m, data: m.data + '+' })),
    );
    await env.core.publish(
      'events',
      keyed(500, 10).map((m) => ({ ...m, data: m.data + '#' })),
    );
    await finish(2500);
    const counts = await Promise.all(
      (await s3.list(bucket)).map(async (n) => (await s3.get(bucket, n)).toString().trim().split('\n').length),
    );
    expect(counts.sort()).toEqual([1000, 1000, 500].sort());
  });

  // The runner's budget is 64 MiB: the open files roll at 16 MiB, and may be over by the record that crossed it.
  it.each([
    ['text', { textConfig: {} }, 10 * 1024, 4000],
    // 100 KB messages as one 64 MiB Parquet file were more than DuckDB's default memory limit could write:
    // the export stayed RESOURCE_ERROR for good.
    ['Parquet', { parquetConfig: { writeMetadata: true } }, 100 * 1024, 700],
  ] as const)(
    "%s: a backlog that arrives as one batch rolls at a quarter of the runner's budget, not in one file",
    async (_, format, record, count) => {
      const bucket = await s3.bucket();
      await env.core.createSubscription('to-s3', { topic: 'events', enableMessageOrdering: true });
      // Waiting before the export starts: its first batch is as much as the runner's budget takes.
      for (let from = 0; from < count; from += 50)
        await env.core.publish(
          'events',
          Array.from({ length: 50 }, (_, i) => ({ data: `${from + i}-${'.'.repeat(record)}`, orderingKey: `k${i % 8}` })),
        );
      await env.core.updateSubscription('to-s3', { cloudStorageConfig: { bucket, filenameDatetimeFormat: Z_FORMAT, ...format } });
      await env.exports.sync();
      const runner = env.exports.runner('to-s3')!;
      await finish(count);
      // Not one failure on the way (a failed file would be written again, and still end ACTIVE).
      expect(runner.stats, JSON.stringify(runner.stats)).toMatchObject({ errors: 0, failed: 0, state: 'ACTIVE' });
      const kind =
        'textConfig' in format ? ({ kind: 'text' } as const) : ({ kind: 'parquet', writeMetadata: true, compression: 'SNAPPY' } as const);
      const records: string[] = [];
      const names = await s3.list(bucket);
      expect(names.length).toBeGreaterThanOrEqual(Math.floor((count * record) / (16 * 1024 * 1024)));
      for (const name of names) {
        const body = await s3.get(bucket, name);
        const inFile = await readRecords(body, kind);
        // Each file's payloads add up to at most a quarter of the budget and the record that crossed it.
        expect(inFile.reduce((n, r) => n + r.data.length, 0)).toBeLessThanOrEqual(16 * 1024 * 1024 + record + 16);
        records.push(...inFile.map((r) => r.data.toString().split('-')[0]!));
      }
      expect(records.length).toBe(count);
      expect(new Set(records).size).toBe(count);
    },
    120_000,
  );

  it('a file stays within maxBytes: the message that would take it past the limit starts the next file', async () => {
    const bucket = await s3.bucket();
    await exportTo(bucket, { maxBytes: 1000, textConfig: {} });
    await env.core.publish('events', keyed(12, 1, 297));
    await finish(12);
    const bodies = await Promise.all((await s3.list(bucket)).map((n) => s3.get(bucket, n)));
    // Lines of ~303 bytes: three to a file; a fourth would make 1,212.
    expect(bodies.map((b) => [b.length <= 1000, b.toString().trim().split('\n').length])).toEqual(Array(4).fill([true, 3]));
  });

  it('rolls on maxBytes (multipart upload for a large file)', async () => {
    const bucket = await s3.bucket();
    await exportTo(bucket, { maxBytes: 10 * 1024 * 1024 });
    const big = 'x'.repeat(3 * 1024 * 1024);
    for (let i = 0; i < 5; i++) await env.core.publish('events', [{ data: `${i}${big}`, orderingKey: 'k' }]);
    await finish(5);
    const names = await s3.list(bucket);
    const sizes = await Promise.all(names.map(async (n) => (await s3.get(bucket, n)).length));
    // 3 messages fit in 10 MiB (a 9 MiB file, uploaded in parts); the 4th would pass it, so starts the next file
    expect(sizes.sort((a, b) => b - a)).toEqual([3 * (big.length + 2), 2 * (big.length + 2)]);
  });

  it('a missing bucket is NOT_FOUND, the backlog stays, and export resumes when the bucket exists', async () => {
    const bucket = await s3.bucket(false);
    await exportTo(bucket, {});
    await env.core.publish('events', keyed(10, 2));
    await waitFor('NOT_FOUND', () => env.core.getSubscription('to-s3').state === 'NOT_FOUND');
    expect(env.core.metrics('to-s3').backlogMessages).toBe(10);
    await s3.minio.makeBucket(bucket);
    await waitFor('ACTIVE', () => env.core.getSubscription('to-s3').state === 'ACTIVE');
    await finish(10);
    expect(env.core.metrics('to-s3').backlogMessages).toBe(0);
    expect(await s3.list(bucket)).toHaveLength(1);
  });

  it('an S3 outage mid-file loses nothing: RESOURCE_ERROR, then every message exactly once', async () => {
    if (!s3.local) return; // needs to stop the server: only the local s3rver can be stopped from here
    const bucket = await s3.bucket();
    await exportTo(bucket, { maxMessages: 1000, avroConfig: { writeMetadata: true } });
    await env.core.publish('events', keyed(600, 20));
    await waitFor('buffered', () => env.exports.runner('to-s3')!.outstanding === 600);
    await s3.stop();
    try {
      const second = keyed(1400, 20).map((m) => ({ ...m, data: `second-${m.data}` }));
      await env.core.publish('events', second.slice(0, 700));
      await env.core.publish('events', second.slice(700));
      await waitFor('RESOURCE_ERROR', () => env.core.getSubscription('to-s3').state === 'RESOURCE_ERROR', 30_000);
      expect(env.core.metrics('to-s3').backlogMessages).toBe(2000);
    } finally {
      await s3.start();
    }
    await waitFor('ACTIVE', () => env.core.getSubscription('to-s3').state === 'ACTIVE', 30_000);
    await finish(2000);
    const subscription = { name: 'projects/p/subscriptions/to-s3', uid: env.core.identity('to-s3').uid };
    const report = await auditSubscription(subscription, parseObjectStorageConfig({ bucket, avroConfig: { writeMetadata: true } }), {
      dataDir: dir.path,
      objectStorage: s3.settings,
    });
    expect(report).toMatchObject({
      records: 2000,
      keys: 20,
      missing: { count: 0 },
      duplicates: { count: 0 },
      outOfOrderInFile: { count: 0 },
      objectErrors: { count: 0 },
    });
  }, 90_000);

  it('the text audit checks objects by size: a payload holding a newline is one record, and a cut object is an error', async () => {
    const bucket = await s3.bucket();
    await exportTo(bucket, {});
    await env.core.publish('events', [
      { data: 'first line\nsecond line', orderingKey: 'k' },
      { data: 'next', orderingKey: 'k' },
    ]);
    await finish(2);
    const subscription = { name: 'projects/p/subscriptions/to-s3', uid: env.core.identity('to-s3').uid };
    const config = parseObjectStorageConfig({ bucket });
    const settings = { dataDir: dir.path, objectStorage: s3.settings };
    expect(await auditSubscription(subscription, config, settings)).toMatchObject({ records: 2, objectErrors: { count: 0 } });

    const [name] = await s3.list(bucket);
    const body = await s3.get(bucket, name!);
    await s3.minio.putObject(bucket, name!, body.subarray(0, body.length - 5));
    expect((await auditSubscription(subscription, config, settings)).objectErrors).toEqual({
      count: 1,
      examples: [`${name}: ${body.length - 5} bytes, manifest says ${body.length}`],
    });
  });

  it('the audit with metadata checks each object against its manifest entry, reports one that does not decode and goes on, and stops when the bucket cannot be read', async () => {
    const bucket = await s3.bucket();
    const format = { kind: 'avro', writeMetadata: true } as const;
    await exportTo(bucket, { maxMessages: 1000, avroConfig: { writeMetadata: true } });
    const messages = keyed(2000, 2);
    await env.core.publish('events', messages.slice(0, 1000));
    await env.core.publish('events', messages.slice(1000));
    await env.core.publish(
      'events',
      Array.from({ length: 1000 }, (_, i) => ({ data: `u${i}` })),
    );
    await finish(3000);
    const subscription = { name: 'projects/p/subscriptions/to-s3', uid: env.core.identity('to-s3').uid };
    const config = parseObjectStorageConfig({ bucket, avroConfig: { writeMetadata: true } });
    const settings = { dataDir: dir.path, objectStorage: s3.settings };
    const audit = () => auditSubscription(subscription, config, settings);
    expect(await audit()).toMatchObject({ objects: 3, records: 3000, missing: { count: 0 }, objectErrors: { count: 0 } });

    // Two objects of 1000 records each, swapped: every count still matches, the contents do not.
    const names = (await s3.list(bucket)).sort();
    const bodies = await Promise.all(names.map((n) => s3.get(bucket, n)));
    await s3.minio.putObject(bucket, names[0]!, bodies[1]!);
    await s3.minio.putObject(bucket, names[1]!, bodies[0]!);
    const swapped = await audit();
    expect(swapped.objectErrors.count).toBe(2);
    expect(swapped.objectErrors.examples.join('\n')).toContain(`${names[0]}: holds`);
    expect(swapped.objectErrors.examples.join('\n')).toContain(`${names[1]}: holds`);
    await s3.minio.putObject(bucket, names[0]!, bodies[0]!);
    await s3.minio.putObject(bucket, names[1]!, bodies[1]!);

    // The last object overwritten with bytes that are not Avro: reported, every message it held missing
    // (keyed ones by their manifest ranges, unkeyed ones by id), the rest checked.
    const inLast = await readRecords(bodies[2]!, format);
    expect(inLast.some((r) => !r.orderingKey)).toBe(true);
    await s3.minio.putObject(bucket, names[2]!, Buffer.from('not an avro file'));
    const torn = await audit();
    expect(torn).toMatchObject({ objects: 3, records: 2000, missing: { count: inLast.length } });
    expect(torn.objectErrors.examples).toEqual([expect.stringMatching(new RegExp(`^${names[2]}: not a readable avro file \\(`))]);
    const unkeyedMissing = new RegExp(`^message \\d+ \\(no ordering key\\), listed in ${names[2]}$`);
    const keyedMissing = new RegExp(`^k\\d: sequence \\d+ \\(in ${names[2]}, which cannot be read\\)$`);
    expect(torn.missing.examples.every((e) => unkeyedMissing.test(e) || keyedMissing.test(e))).toBe(true);

    // A bucket that cannot be reached says nothing about the records: the audit fails rather than report them lost.
    const unreachable = { ...s3.settings, endpoint: `http://127.0.0.1:${await closedPort()}` };
    await expect(auditSubscription(subscription, config, { dataDir: dir.path, objectStorage: unreachable })).rejects.toThrow(
      `cannot read ${names[0]} from bucket ${bucket}`,
    );
  });

  it("the audit counts a record gone from the end of its key's range as missing, naming the key and the object that lists it", async () => {
    const bucket = await s3.bucket();
    await exportTo(bucket, { parquetConfig: { writeMetadata: true } });
    await env.core.publish('events', keyed(30, 3));
    await finish(30);
    const subscription = { name: 'projects/p/subscriptions/to-s3', uid: env.core.identity('to-s3').uid };
    const config = parseObjectStorageConfig({ bucket, parquetConfig: { writeMetadata: true } });
    const audit = () => auditSubscription(subscription, config, { dataDir: dir.path, objectStorage: s3.settings });
    expect(await audit()).toMatchObject({ objects: 1, records: 30, missing: { count: 0 }, objectErrors: { count: 0 } });

    // The object rewritten without k1's first record and k2's last: no gap between the sequences it still
    // holds shows either (the audit counted nothing missing), only its manifest entry does.
    const [name] = await s3.list(bucket);
    const original = join(dir.path, 'original.parquet');
    const cut = join(dir.path, 'cut.parquet');
    writeFileSync(original, await s3.get(bucket, name!));
    await queryDuckDb(
      join(dir.path, 'cut.duckdb'),
      `COPY (SELECT * EXCLUDE (file_row_number) FROM read_parquet('${original}', file_row_number = true)
        WHERE NOT (ordering_key = 'k1' AND sequence = 1) AND NOT (ordering_key = 'k2' AND sequence = 10) ORDER BY file_row_number)
        TO '${cut}' (FORMAT parquet)`,
    );
    await s3.minio.putObject(bucket, name!, readFileSync(cut));
    const report = await audit();
    expect(report).toMatchObject({ objects: 1, records: 28, keys: 3 });
    expect(report.missing).toEqual({
      count: 2,
      examples: [
        `k1: sequence 1 (listed in ${name}, which does not hold it)`,
        `k2: sequence 10 (listed in ${name}, which does not hold it)`,
      ],
    });
    expect(report.objectErrors.count).toBe(2);
  });

  it("a query view fetches an object again when its local copy is not the object's size (cut short, or written over)", async () => {
    const bucket = await s3.bucket();
    await exportTo(bucket, { parquetConfig: {} });
    await env.core.publish('events', keyed(10, 2));
    await finish(10);
    const target = {
      subscription: 'projects/p/subscriptions/to-s3',
      identity: { uid: env.core.identity('to-s3').uid, adoptsNameKeyedProgress: false },
      config: parseObjectStorageConfig({ bucket, parquetConfig: {} }),
      settings: { dataDir: dir.path, objectStorage: s3.settings },
    };
    const count = async () => {
      const view = await parquetView(target);
      return queryDuckDb(join(dir.path, 'view.duckdb'), `SELECT count(*)::INT AS n FROM (${view!.select})`);
    };
    expect(await count()).toEqual([{ n: 10 }]);
    const [copy] = (await parquetView(target))!.files;
    // Another Parquet file in its place: it was read as the object from then on (1 row).
    await queryDuckDb(join(dir.path, 'forge.duckdb'), `COPY (SELECT 1 AS forged) TO '${copy}' (FORMAT parquet)`);
    expect(await count()).toEqual([{ n: 10 }]);
  });

  it('a query view whose object is gone from the bucket says which object, in which bucket', async () => {
    const bucket = await s3.bucket();
    await exportTo(bucket, { parquetConfig: {} });
    await env.core.publish('events', keyed(10, 2));
    await finish(10);
    const [name] = await s3.list(bucket);
    await s3.minio.removeObject(bucket, name!);
    const view = parquetView({
      subscription: 'projects/p/subscriptions/to-s3',
      identity: { uid: env.core.identity('to-s3').uid, adoptsNameKeyedProgress: false },
      config: parseObjectStorageConfig({ bucket, parquetConfig: {} }),
      settings: { dataDir: dir.path, objectStorage: s3.settings },
    });
    // It said only "The specified key does not exist."
    await expect(view).rejects.toThrow(`cannot read ${name} from bucket ${bucket}: it is missing from the bucket`);
  });

  it('a query view of an export with no object yet has the columns its objects will have, and no rows', async () => {
    const bucket = await s3.bucket();
    await exportTo(bucket, { parquetConfig: { writeMetadata: true } });
    const target = {
      subscription: 'projects/p/subscriptions/to-s3',
      identity: { uid: env.core.identity('to-s3').uid, adoptsNameKeyedProgress: false },
      config: parseObjectStorageConfig({ bucket, parquetConfig: { writeMetadata: true } }),
      settings: { dataDir: dir.path, objectStorage: s3.settings },
    };
    const columns = async () =>
      queryDuckDb(
        join(dir.path, 'view.duckdb'),
        `SELECT column_name, column_type FROM (DESCRIBE (${(await parquetView(target))!.select}))`,
      );
    const empty = await columns();
    // It had one column, data, of no type: a query naming ordering_key failed with "not found".
    const grouped = `SELECT ordering_key, max(sequence) AS last FROM (${(await parquetView(target))!.select}) GROUP BY ALL`;
    expect(await queryDuckDb(join(dir.path, 'view.duckdb'), grouped)).toEqual([]);
    await env.core.publish('events', keyed(2, 1));
    await finish(2);
    expect(empty).toEqual(await columns());
  });

  it('a query view whose object was written over in the bucket by another file refuses it, naming the object and both sizes', async () => {
    const bucket = await s3.bucket();
    await exportTo(bucket, { parquetConfig: {} });
    await env.core.publish('events', keyed(10, 2));
    await finish(10);
    const [name] = await s3.list(bucket);
    const exported = (await s3.get(bucket, name!)).length;
    // A user's own Parquet file uploaded under the object's name, before any query cached the object.
    const forged = join(dir.path, 'forged.parquet');
    await queryDuckDb(join(dir.path, 'forge.duckdb'), `COPY (SELECT 1 AS forged) TO '${forged}' (FORMAT parquet)`);
    const body = readFileSync(forged);
    await s3.minio.putObject(bucket, name!, body);
    const view = parquetView({
      subscription: 'projects/p/subscriptions/to-s3',
      identity: { uid: env.core.identity('to-s3').uid, adoptsNameKeyedProgress: false },
      config: parseObjectStorageConfig({ bucket, parquetConfig: {} }),
      settings: { dataDir: dir.path, objectStorage: s3.settings },
    });
    // It was read as the object: the view answered 1 row (of NULL data) for the 10 messages, with no word.
    await expect(view).rejects.toThrow(
      `cannot read ${name} from bucket ${bucket}: it is ${body.length} bytes, the manifest lists ${exported}`,
    );
  });

  it('a subscription whose format changed keeps a clean audit, and its query view reads only its Parquet objects', async () => {
    const bucket = await s3.bucket();
    await exportTo(bucket, { parquetConfig: { writeMetadata: true } });
    const held = async (count: number) =>
      waitFor(
        'deliveries',
        () => (env.exports.runner('to-s3')?.outstanding ?? 0) + (env.exports.runner('to-s3')?.stats.written ?? 0) >= count,
      );
    await env.core.publish('events', keyed(20, 2));
    await held(20);
    // Each change restarts the export: the open file is finalized under the old format.
    const change = async (format: Record<string, unknown>) => {
      await env.core.updateSubscription('to-s3', { cloudStorageConfig: { bucket, filenameDatetimeFormat: Z_FORMAT, ...format } });
      await env.exports.sync();
    };
    // The runner after a change carries its predecessor's totals on: the counts are the subscription's.
    await change({ avroConfig: { writeMetadata: true } });
    await env.core.publish('events', keyed(20, 2));
    await held(40);
    await change({ parquetConfig: {} });
    await env.core.publish('events', keyed(20, 2));
    await finish(60);

    const subscription = { name: 'projects/p/subscriptions/to-s3', uid: env.core.identity('to-s3').uid };
    const config = parseObjectStorageConfig({ bucket, parquetConfig: {} });
    const settings = { dataDir: dir.path, objectStorage: s3.settings };
    expect(await auditSubscription(subscription, config, settings)).toMatchObject({
      objects: 3,
      records: 60,
      objectErrors: { count: 0 },
      outOfOrderInFile: { count: 0 },
    });
    const view = await parquetView({
      subscription: subscription.name,
      identity: { uid: subscription.uid, adoptsNameKeyedProgress: false },
      config,
      settings,
    });
    const rows = await queryDuckDb(
      join(dir.path, 'view.duckdb'),
      `SELECT count(*) AS n, count(subscription_name) AS with_metadata FROM (${view!.select})`,
    );
    expect(rows).toEqual([{ n: 40n, with_metadata: 20n }]);
    // The Avro object is not in the view, and the view says so (orderly query prints it beside the answer).
    expect(view!.leftOut).toBe(
      "1 object(s) holding 20 records in another format (avro) are not in the view: written before the subscription's format changed, or by a worker whose job file gives another format",
    );
  });
});

describe('order across files', () => {
  it('audit detects a key whose file-name order disagrees with its sequence order (a clock step back)', async () => {
    const dir = tempDir();
    const bucket = await s3.bucket();
    let now = new Date(Date.UTC(2026, 0, 1, 10, 5, 0));
    const config = parseObjectStorageConfig({
      bucket,
      maxBytes: 1000,
      filenameDatetimeFormat: 'YYYY-MM-DDThh:mm:ssZ',
      parquetConfig: { writeMetadata: true },
    });
    const writer = new ObjectStorageWriter(config, writerContext('skew', { dataDir: dir.path, objectStorage: s3.settings }), () => now);
    await writer.open();
    const msg = (key: string, sequence: number, size = 600) => ({
      id: `${key}-${sequence}`,
      deliveryAttempt: 0,
      message: {
        messageId: `${key}${sequence}`,
        publishTime: now,
        data: Buffer.alloc(size, 'a'),
        attributes: {},
        orderingKey: key,
        sequence,
      },
    });
    // K:1 and K:2 fill a file each, named 10:05 (two would pass maxBytes); then the clock steps back and
    // K:3 and K:4 go to files named 10:00.
    const written = (await writer.write([msg('K', 1), msg('K', 2)])).written;
    now = new Date(Date.UTC(2026, 0, 1, 10, 0, 0));
    written.push(...(await writer.write([msg('K', 3), msg('K', 4), msg('J', 1, 10)])).written);
    written.push(...(await writer.flush('all')).written);
    expect(written.sort()).toEqual(['J-1', 'K-1', 'K-2', 'K-3', 'K-4']);
    await writer.close();
    const names = await s3.list(bucket);
    // K:3's file and K:4's (J:1 fits beside it) are named 10:00, before K:1's and K:2's, named 10:05.
    expect(names.map((n) => n.slice(0, 19))).toEqual([
      '2026-01-01T10:00:00',
      '2026-01-01T10:00:00',
      '2026-01-01T10:05:00',
      '2026-01-01T10:05:00',
    ]);
    const report = await auditObjects(
      new S3Client({ ...s3.settings, credentials: s3.settings }),
      new ManifestReader(writer.manifestPath),
      config.format,
    );
    expect(report).toMatchObject({
      objects: 4,
      records: 5,
      keys: 2,
      missing: { count: 0 },
      duplicates: { count: 0 },
      outOfOrderInFile: { count: 0 },
    });
    expect(report.skewedKeys.count).toBe(1);
    // The earlier-named object named is the one holding the key's highest sequence before it (K:4's).
    expect(report.skewedKeys.examples[0]).toMatch(/^K: .*10:05:00.* holds sequence 1, but the earlier-named .*10:00:00.* holds 4$/);
    dir.remove();
  });
});

describe('restart recovery', () => {
  const make = (dataDir: string, bucket: string) =>
    new ObjectStorageWriter(
      parseObjectStorageConfig({ bucket, filenameDatetimeFormat: 'YYYY-MM-DDThh:mm:ssZ', avroConfig: { writeMetadata: true } }),
      writerContext('rec', { dataDir, objectStorage: s3.settings }),
    );
  const msg = (key: string, sequence: number) => ({ ...keyedExportMessage(key, sequence), id: `${key}-${sequence}-${Math.random()}` });

  it('a redelivery of committed messages (crash between commit and ack) is acked, not written again', async () => {
    const dir = tempDir();
    const bucket = await s3.bucket();
    const first = make(dir.path, bucket);
    await first.open();
    await first.write([msg('K', 1), msg('K', 2)]);
    expect((await first.flush('all')).written).toHaveLength(2);
    await first.close();
    const restarted = make(dir.path, bucket);
    await restarted.open();
    const again = [msg('K', 1), msg('K', 2), msg('K', 3)];
    const result = await restarted.write(again);
    expect(result.written).toEqual([again[0]!.id, again[1]!.id]); // K:3 is buffered in a new file
    expect((await restarted.flush('all')).written).toEqual([again[2]!.id]);
    await restarted.close();
    const objects = await s3.list(bucket);
    expect(objects).toHaveLength(2);
    const all = (
      await Promise.all(objects.map(async (o) => readRecords(await s3.get(bucket, o), { kind: 'avro', writeMetadata: true })))
    ).flat();
    expect(all.map((r) => r.sequence).sort()).toEqual([1, 2, 3]);
    dir.remove();
  });

  it('unkeyed ids are remembered for redeliveries, and forgotten once past messageRetentionDuration', async () => {
    const dir = tempDir();
    const bucket = await s3.bucket();
    let now = new Date();
    const writer = new ObjectStorageWriter(
      parseObjectStorageConfig({ bucket, filenameDatetimeFormat: 'YYYY-MM-DDThh:mm:ssZ', textConfig: {} }),
      writerContext(
        'loose',
        { dataDir: dir.path, objectStorage: s3.settings },
        { spec: { enableMessageOrdering: false, messageRetentionDuration: 600 } },
      ),
      () => now,
    );
    const unkeyed = (id: string) => ({
      id: `${id}-${Math.random()}`,
      deliveryAttempt: 0,
      message: { messageId: id, publishTime: now, data: Buffer.from(id), attributes: {}, orderingKey: '', sequence: 0 },
    });
    await writer.open();
    await writer.write([unkeyed('m1')]);
    await writer.flush('all');
    const again = unkeyed('m1');
    expect((await writer.write([again])).written).toEqual([again.id]); // recognised: acked, not written
    now = new Date(now.getTime() + 11 * 60_000); // m1 is now past the 10-minute retention
    const late = unkeyed('m1');
    expect((await writer.write([late])).written).toEqual([]); // not recognised any more: buffered anew
    await writer.close();
    dir.remove();
  });

  it('an upload that never committed (a crash mid-upload) is removed at the next start', async () => {
    const dir = tempDir();
    const bucket = await s3.bucket();
    const writer = make(dir.path, bucket);
    await writer.open();
    await writer.close();
    const manifest = new Manifest(writer.manifestPath);
    await manifest.markPending('2026-01-01T00:00:00Z_orphan');
    manifest.close();
    await s3.minio.putObject(bucket, '2026-01-01T00:00:00Z_orphan', Buffer.from('half'));
    await s3.minio.putObject(bucket, 'not-ours.txt', Buffer.from('left alone'));
    const restarted = make(dir.path, bucket);
    await restarted.open();
    await restarted.close();
    expect(await s3.list(bucket)).toEqual(['not-ours.txt']);
    expect(unfinishedUploads(writer.manifestPath)).toEqual([]);
    dir.remove();
  });

  it('an upload a crash left uncommitted is removed from the bucket it went to, after the job file changed the bucket', async () => {
    const dir = tempDir();
    const before = await s3.bucket();
    const after = await s3.bucket();
    const first = make(dir.path, before);
    await first.open();
    await first.write([msg('K', 1)]);
    expect((await first.flush('all')).written).toHaveLength(1);
    await first.close();
    // The crash came between the upload and its commit: the manifest ends with the object's pending line.
    const lines = readFileSync(first.manifestPath, 'utf8').trimEnd().split('\n');
    expect(lines.map((l) => (JSON.parse(l) as { type: string }).type)).toEqual(['pending', 'committed']);
    writeFileSync(first.manifestPath, `${lines[0]}\n`);
    expect(await s3.list(before)).toHaveLength(1);

    const restarted = make(dir.path, after);
    await restarted.open();
    await restarted.close();
    // Its messages were never acked and come again: the copy in the old bucket would stand outside the manifest.
    expect(await s3.list(before)).toEqual([]);
    expect(unfinishedUploads(first.manifestPath)).toEqual([]);
    dir.remove();
  });
});
