import avro from 'avsc';
import { once } from 'node:events';
import { createWriteStream, type WriteStream } from 'node:fs';
import { Readable } from 'node:stream';
import type { PubsubMessage } from '../../src/core/message.js';
import type { OutputFormat } from './config.js';
import { ParquetFile, readParquetRows } from './parquet-file.js';

/** A record as read back from an object, for the audit and the tests. */
export interface ExportedRecord {
  data: Buffer;
  orderingKey?: string;
  sequence?: number;
  messageId?: string;
  attributes?: Record<string, string>;
  publishTimeMicros?: number;
}

/** Appends records to a local file (spilled to disk, so a large file never sits in memory). */
export interface RecordFileWriter {
  append(subscription: string, m: PubsubMessage): Promise<void>;
  close(): Promise<void>;
  /** Payload and metadata bytes appended so far (the roll-on-maxBytes measure). */
  readonly bytes: number;
}

/** Pub/Sub's Avro record layouts; Orderly adds ordering_key and sequence to the metadata form. */
const AVRO_PLAIN = avro.Type.forSchema({ type: 'record', name: 'PubsubMessage', namespace: 'com.google.pubsub', fields: [{ name: 'data', type: 'bytes' }] });
const AVRO_METADATA = avro.Type.forSchema({
  type: 'record',
  name: 'PubsubMessageWithMetadata',
  namespace: 'com.google.pubsub',
  fields: [
    { name: 'subscription_name', type: 'string' },
    { name: 'message_id', type: 'string' },
    { name: 'publish_time', type: { type: 'long', logicalType: 'timestamp-micros' } },
    { name: 'attributes', type: { type: 'map', values: 'string' } },
    { name: 'data', type: 'bytes' },
    { name: 'ordering_key', type: 'string' },
    { name: 'sequence', type: 'long' },
  ],
});

function metadataRecord(subscription: string, m: PubsubMessage) {
  return {
    subscription_name: subscription,
    message_id: m.messageId,
    publish_time: m.publishTime.getTime() * 1000,
    attributes: m.orderingKey ? { ...m.attributes, orderingKey: m.orderingKey } : m.attributes,
    data: m.data,
    ordering_key: m.orderingKey,
    sequence: m.sequence,
  };
}

function metadataBytes(subscription: string, m: PubsubMessage): number {
  let n = m.data.byteLength + subscription.length + m.messageId.length + m.orderingKey.length + 16;
  for (const [k, v] of Object.entries(m.attributes)) n += k.length + v.length;
  return n;
}

export async function openRecordFile(path: string, format: OutputFormat): Promise<RecordFileWriter> {
  if (format.kind === 'parquet') {
    const file = await ParquetFile.create(path, format.writeMetadata, format.compression);
    let bytes = 0;
    return {
      get bytes() {
        return bytes;
      },
      async append(subscription, m) {
        file.append(subscription, m, format.writeMetadata ? JSON.stringify(metadataRecord(subscription, m).attributes) : '');
        bytes += format.writeMetadata ? metadataBytes(subscription, m) : m.data.byteLength;
      },
      close: () => file.close(),
    };
  }
  const file = createWriteStream(path);
  const opened = once(file, 'open');
  await opened;
  if (format.kind === 'avro') {
    const type = format.writeMetadata ? AVRO_METADATA : AVRO_PLAIN;
    const encoder = new avro.streams.BlockEncoder(type, { codec: 'null' });
    encoder.pipe(file);
    let bytes = 0;
    return {
      get bytes() {
        return bytes;
      },
      async append(subscription, m) {
        const ok = encoder.write(format.writeMetadata ? metadataRecord(subscription, m) : { data: m.data });
        bytes += format.writeMetadata ? metadataBytes(subscription, m) : m.data.byteLength;
        if (!ok) await once(encoder, 'drain');
      },
      async close() {
        encoder.end();
        await once(file, 'finish');
      },
    };
  }
  return textWriter(file);
}

/** Records are gathered into chunks of this size before they reach the file: few, large writes. */
const CHUNK_BYTES = 1024 * 1024;

function textWriter(file: WriteStream): RecordFileWriter {
  let bytes = 0;
  let parts: Buffer[] = [];
  let partBytes = 0;
  const newline = Buffer.from('\n');
  const writeChunk = async () => {
    const accepted = file.write(Buffer.concat(parts, partBytes));
    parts = [];
    partBytes = 0;
    if (!accepted) await once(file, 'drain');
  };
  return {
    get bytes() {
      return bytes;
    },
    async append(_subscription, m) {
      bytes += m.data.byteLength + 1;
      parts.push(m.data, newline);
      partBytes += m.data.byteLength + 1;
      if (partBytes >= CHUNK_BYTES) await writeChunk();
    },
    async close() {
      if (partBytes) await writeChunk();
      file.end();
      await once(file, 'finish');
    },
  };
}

/** Reads an object's records back (text: one record per line, payload only). */
export async function readRecords(body: Buffer, format: OutputFormat): Promise<ExportedRecord[]> {
  if (format.kind === 'text') {
    const text = body.toString('utf8');
    if (!text) return [];
    return text.replace(/\n$/, '').split('\n').map((line) => ({ data: Buffer.from(line) }));
  }
  if (format.kind === 'avro') {
    const records: ExportedRecord[] = [];
    const decoder = new avro.streams.BlockDecoder({ readerSchema: format.writeMetadata ? AVRO_METADATA : AVRO_PLAIN });
    decoder.on('data', (r: Record<string, unknown>) => records.push(toRecord(r)));
    Readable.from([body]).pipe(decoder);
    await once(decoder, 'end');
    return records;
  }
  return (await readParquetRows(body)).map((r) => {
    const rec = toRecord(r);
    if (typeof r.attributes === 'string') rec.attributes = JSON.parse(r.attributes);
    return rec;
  });
}

function toRecord(r: Record<string, unknown>): ExportedRecord {
  const rec: ExportedRecord = { data: Buffer.from(r.data as Uint8Array) };
  if (r.ordering_key !== undefined) rec.orderingKey = String(r.ordering_key);
  if (r.sequence !== undefined) rec.sequence = Number(r.sequence);
  if (r.message_id !== undefined) rec.messageId = String(r.message_id);
  if (r.attributes !== undefined && typeof r.attributes === 'object') rec.attributes = r.attributes as Record<string, string>;
  if (r.publish_time !== undefined) rec.publishTimeMicros = r.publish_time instanceof Date ? r.publish_time.getTime() * 1000 : Number(r.publish_time);
  return rec;
}
