import avro from 'avsc';
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { createWriteStream, type WriteStream } from 'node:fs';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { PubsubMessage } from '../../src/core/message.js';
import {
  avroFileLayout,
  ORDERING_METADATA_FIELDS,
  PUBSUB_METADATA_FIELDS,
  type AvroFileLayout,
} from '../../src/schema/avro-file-schema.js';
import { avroType, LOGICAL_TYPES } from '../../src/schema/avro-types.js';
import {
  decodeStoredMessage,
  givenTopicSchema,
  messageSchemaOf,
  MessageSchemaError,
  type TopicSchema,
} from '../../src/schema/topic-schema.js';
import { ChunkedFile } from './chunked-file.js';
import type { OutputFormat } from './config.js';
import type { ParquetScratch } from './parquet-scratch.js';

/** A record as read back from an object, for the audit and the tests. */
export interface ExportedRecord {
  data: Buffer;
  orderingKey?: string;
  sequence?: number;
  messageId?: string;
  attributes?: Record<string, string>;
  publishTimeMicros?: number;
  /** A record of a topic-schema file (avroConfig.useTopicSchema), as the file's own schema reads it. */
  value?: Record<string, unknown>;
}

/** Appends records to a local file (spilled to disk, so a large file never sits in memory). */
export interface RecordFileWriter {
  /**
   * Throws RecordConversionError, with the file unchanged, for a message that cannot become a record.
   * Returns a promise only when the caller must wait (a full chunk being written, an encoder's
   * backpressure): most appends are a copy, and a promise each was a tenth of a text export's garbage.
   */
  append(subscription: string, m: PubsubMessage): void | Promise<void>;
  /**
   * False when the message needs another layout than this file's (a topic schema revision the file's
   * schema does not cover, committed after the file opened): the writer rolls the file first.
   */
  fits(m: PubsubMessage): boolean;
  /** What appending the message adds to `bytes`. */
  size(subscription: string, m: PubsubMessage): number;
  close(): Promise<void>;
  /** Payload and metadata bytes appended so far (the roll-on-maxBytes measure). */
  readonly bytes: number;
}

/** Pub/Sub's Avro record layouts; Orderly adds ordering_key and sequence to the metadata form. */
const AVRO_PLAIN = avro.Type.forSchema({
  type: 'record',
  name: 'PubsubMessage',
  namespace: 'com.google.pubsub',
  fields: [{ name: 'data', type: 'bytes' }],
});
// The logical types keep publish_time's annotation in the file's schema: without them avsc drops it, and
// readers saw a plain long where Pub/Sub's layout has a timestamp.
const AVRO_METADATA = avro.Type.forSchema(
  {
    type: 'record',
    name: 'PubsubMessageWithMetadata',
    namespace: 'com.google.pubsub',
    fields: [...PUBSUB_METADATA_FIELDS, { name: 'data', type: 'bytes' }, ...ORDERING_METADATA_FIELDS],
  },
  { logicalTypes: LOGICAL_TYPES },
);

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

/** A record's payload and metadata, in bytes (UTF-8: a key or attribute of other scripts counts all its bytes). */
function metadataBytes(subscription: string, m: PubsubMessage): number {
  let n = m.data.byteLength + Buffer.byteLength(subscription) + m.messageId.length + Buffer.byteLength(m.orderingKey) + 16;
  for (const k in m.attributes) n += Buffer.byteLength(k) + Buffer.byteLength(m.attributes[k]!);
  return n;
}

/** A message that cannot be written in this format (it fails; the rest of its key waits behind it). */
export class RecordConversionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RecordConversionError';
  }
}

const fitsAny = () => true;

export async function openRecordFile(
  path: string,
  format: OutputFormat,
  topicSchema: () => TopicSchema | undefined = () => undefined,
  parquetScratch?: ParquetScratch,
): Promise<RecordFileWriter> {
  if (format.kind === 'parquet') {
    if (!parquetScratch) throw new Error(`a Parquet file (${path}) is encoded in its data directory's Parquet scratch: none was given`);
    // Loaded for Parquet only: DuckDB's native library costs a text or Avro export ~40 ms and ~20 MiB.
    const { ParquetFile } = await import('./parquet-file.js');
    const file = await ParquetFile.create(parquetScratch, path, format.writeMetadata, format.compression);
    return countingWriter(
      format.writeMetadata,
      (subscription, m) =>
        file.append(subscription, m, format.writeMetadata ? JSON.stringify(metadataRecord(subscription, m).attributes) : ''),
      () => file.close(),
    );
  }
  if (format.kind === 'text') return textWriter(path);
  const file = createWriteStream(path);
  const opened = once(file, 'open');
  await opened;
  if (format.useTopicSchema) return topicSchemaWriter(file, format.writeMetadata, topicSchema);
  const type = format.writeMetadata ? AVRO_METADATA : AVRO_PLAIN;
  const avroFile = avroFileStream(type, JSON.stringify(type.schema({ exportAttrs: true })), file);
  return countingWriter(
    format.writeMetadata,
    // Not async: a record the encoder refuses throws here, before it is counted.
    (subscription, m) => avroFile.write(format.writeMetadata ? metadataRecord(subscription, m) : { data: m.data }),
    () => avroFile.close(),
  );
}

interface AvroFileStream {
  /** Throws RecordConversionError, with the file unchanged, for a record the type does not accept. */
  write(record: unknown): void | Promise<void>;
  /** Ends the file; rejects (never hangs) when the stream broke. */
  close(): Promise<void>;
}

/** The Avro object container header (Avro specification, "Object Container Files"). */
const AVRO_HEADER = avro.Type.forSchema({
  type: 'record',
  name: 'org.apache.avro.file.Header',
  fields: [
    { name: 'magic', type: { type: 'fixed', name: 'Magic', size: 4 } },
    { name: 'meta', type: { type: 'map', values: 'bytes' } },
    { name: 'sync', type: { type: 'fixed', name: 'Sync', size: 16 } },
  ],
});

/**
 * Records encoded into `file` with avsc's block encoder. The encoder takes an invalid record as a stream
 * error: it stops, its pipe to the file never finishes, and a close waiting for the file then hung the
 * connector and the process's shutdown. So each record is checked before it reaches the encoder (it fails
 * alone), and the file's end is awaited through a pipeline, which fails when either stream does.
 *
 * The header is written here, from `schemaText`: avsc's would JSON.stringify the type's schema, which
 * throws on a topic schema's `long` default beyond 2^53 (AvroFileLayout.schemaText holds it exactly).
 */
function avroFileStream(type: avro.Type, schemaText: string, file: WriteStream): AvroFileStream {
  const sync = randomBytes(16);
  file.write(
    AVRO_HEADER.toBuffer({
      magic: Buffer.from('Obj\x01', 'latin1'),
      meta: { 'avro.schema': Buffer.from(schemaText), 'avro.codec': Buffer.from('null') },
      sync,
    }),
  );
  const encoder = new avro.streams.BlockEncoder(type, { codec: 'null', writeHeader: 'never', syncMarker: sync });
  let failure: { error: unknown } | undefined;
  const ended = pipeline(encoder, file).catch((error: unknown) => {
    failure ??= { error };
  });
  const raise = () => {
    if (failure) throw failure.error;
  };
  return {
    write(record) {
      raise();
      const invalid: string[] = [];
      if (!type.isValid(record, { errorHook: (path) => invalid.push(path.join('.') || '(the record)') })) {
        throw new RecordConversionError(`the record does not match the file's Avro schema at ${invalid.join(', ')}`);
      }
      return encoder.write(record) ? undefined : once(encoder, 'drain').then(() => undefined);
    },
    async close() {
      encoder.end();
      await ended;
      raise();
    },
  };
}

/** A writer whose size is counted per record appended: the payload, or the whole record with its metadata. */
function countingWriter(
  withMetadata: boolean,
  write: (subscription: string, m: PubsubMessage) => void | Promise<void>,
  close: () => Promise<void>,
): RecordFileWriter {
  let bytes = 0;
  const size = (subscription: string, m: PubsubMessage) => (withMetadata ? metadataBytes(subscription, m) : m.data.byteLength);
  return {
    get bytes() {
      return bytes;
    },
    fits: fitsAny,
    size,
    append(subscription, m) {
      const written = write(subscription, m);
      bytes += size(subscription, m);
      return written;
    },
    close,
  };
}

const NEWLINE = 0x0a;

/** Text: each payload and a newline. */
async function textWriter(path: string): Promise<RecordFileWriter> {
  const file = await ChunkedFile.open(path);
  let bytes = 0;
  return {
    get bytes() {
      return bytes;
    },
    fits: fitsAny,
    size: (_subscription, m) => m.data.byteLength + 1,
    append(_subscription, m) {
      const record = m.data.byteLength + 1;
      const written = file.append(record, m.data, textLine);
      bytes += record;
      return written;
    },
    close: () => file.close(),
  };
}

function textLine(chunk: Buffer, at: number, data: Buffer): number {
  const end = at + data.copy(chunk, at);
  chunk[end] = NEWLINE;
  return end + 1;
}

/**
 * An Avro file laid out by the topic's schema (avroConfig.useTopicSchema; docs/schemas.md "Avro files with
 * the topic schema"). The file's schema is one revision's: the newest of the topic's range when the first
 * message comes, if that message's revision is in the range, else (another schema's, or the topic has
 * no schema now) the message's own. Messages of older
 * revisions in the range are converted by Avro schema resolution (revisions of a schema are compatible
 * both ways); a message of any other revision does not fit, and the writer starts a new file for it.
 */
function topicSchemaWriter(file: WriteStream, writeMetadata: boolean, topicSchema: () => TopicSchema | undefined): RecordFileWriter {
  const layouts = new Map<string, AvroFileLayout>();
  const layoutOf = (schemaName: string, revisionId: string, topic: TopicSchema): AvroFileLayout => {
    const key = `${schemaName}@${revisionId}`;
    let layout = layouts.get(key);
    if (!layout) {
      layout = avroFileLayout(topic.revision(schemaName, revisionId), writeMetadata);
      layouts.set(key, layout);
    }
    return layout;
  };
  let chosen: { key: string; layout: AvroFileLayout; covers: Set<string>; avroFile: AvroFileStream } | undefined;
  const resolvers = new Map<string, avro.Resolver>();
  let bytes = 0;
  const size = (subscription: string, m: PubsubMessage) => (writeMetadata ? metadataBytes(subscription, m) : m.data.byteLength);
  return {
    get bytes() {
      return bytes;
    },
    size,
    fits(m) {
      if (!chosen) return true;
      try {
        const { schemaName, revisionId } = messageSchemaOf(m.attributes);
        return chosen.covers.has(`${schemaName}@${revisionId}`);
      } catch {
        return true; // append refuses it
      }
    },
    async append(subscription, m) {
      let record: unknown;
      try {
        const topic = givenTopicSchema(topicSchema());
        const { schemaName, revisionId, decoded } = decodeStoredMessage(topic, m);
        const key = `${schemaName}@${revisionId}`;
        if (!chosen) {
          const current = topic.current;
          const inRange = schemaName === current?.schema ? current.revisions.map((r) => `${current.schema}@${r.revisionId}`) : [];
          const layoutKey = inRange.includes(key) ? inRange[inRange.length - 1]! : key;
          const [name, id] = [layoutKey.slice(0, layoutKey.lastIndexOf('@')), layoutKey.slice(layoutKey.lastIndexOf('@') + 1)];
          const layout = layoutOf(name, id, topic);
          const avroFile = avroFileStream(layout.type, layout.schemaText, file);
          chosen = { key: layoutKey, layout, covers: new Set(inRange.includes(key) ? inRange : [key]), avroFile };
        }
        const own = layoutOf(schemaName, revisionId, topic);
        const metadata = writeMetadata ? recordMetadata(subscription, m) : undefined;
        record = own.record(decoded, metadata);
        if (key !== chosen.key) {
          let resolver = resolvers.get(key);
          if (!resolver) {
            resolver = chosen.layout.type.createResolver(own.type);
            resolvers.set(key, resolver);
          }
          record = chosen.layout.type.fromBuffer(own.type.toBuffer(record), resolver);
        }
      } catch (e) {
        if (e instanceof MessageSchemaError) throw new RecordConversionError(e.message);
        throw new RecordConversionError(`the message cannot be written with the topic schema: ${(e as Error).message}`);
      }
      const written = chosen.avroFile.write(record);
      bytes += size(subscription, m);
      await written;
    },
    async close() {
      if (chosen) return chosen.avroFile.close();
      file.end();
      await once(file, 'finish');
    },
  };
}

function recordMetadata(subscription: string, m: PubsubMessage) {
  return {
    subscriptionName: subscription,
    messageId: m.messageId,
    publishTimeMicros: BigInt(m.publishTime.getTime()) * 1000n,
    attributes: m.attributes,
    orderingKey: m.orderingKey,
    sequence: BigInt(m.sequence),
  };
}

/** Reads an object's records back (text: one record per line, payload only). */
export async function readRecords(body: Buffer, format: OutputFormat): Promise<ExportedRecord[]> {
  if (format.kind === 'text') {
    const text = body.toString('utf8');
    if (!text) return [];
    return text
      .replace(/\n$/, '')
      .split('\n')
      .map((line) => ({ data: Buffer.from(line) }));
  }
  if (format.kind === 'avro') {
    const records: ExportedRecord[] = [];
    // A topic-schema file is read with its own schema (from its header), longs as bigints.
    const decoder = format.useTopicSchema
      ? new avro.streams.BlockDecoder({ parseHook: (schema) => avroType(schema) })
      : new avro.streams.BlockDecoder({ readerSchema: format.writeMetadata ? AVRO_METADATA : AVRO_PLAIN });
    decoder.on('data', (r: Record<string, unknown>) => records.push(toRecord(r, format.useTopicSchema === true)));
    Readable.from([body]).pipe(decoder);
    await once(decoder, 'end');
    return records;
  }
  const { readParquetRows } = await import('./parquet-file.js');
  return (await readParquetRows(body)).map((r) => {
    const rec = toRecord(r);
    if (typeof r.attributes === 'string') rec.attributes = JSON.parse(r.attributes) as Record<string, string>;
    return rec;
  });
}

function toRecord(r: Record<string, unknown>, topicSchema = false): ExportedRecord {
  const rec: ExportedRecord = topicSchema ? { data: Buffer.alloc(0), value: r } : { data: Buffer.from(r.data as Uint8Array) };
  if (typeof r.ordering_key === 'string') rec.orderingKey = r.ordering_key;
  if (r.sequence !== undefined) rec.sequence = Number(r.sequence);
  if (typeof r.message_id === 'string') rec.messageId = r.message_id;
  if (r.attributes !== undefined && typeof r.attributes === 'object') rec.attributes = r.attributes as Record<string, string>;
  if (r.publish_time !== undefined)
    rec.publishTimeMicros = r.publish_time instanceof Date ? r.publish_time.getTime() * 1000 : Number(r.publish_time);
  return rec;
}
