import { rm } from 'node:fs/promises';
import type { ExportMessage } from '../../src/connector/connector.js';
import type { RedeliveryMark } from '../../src/connector/redelivery-filter.js';
import type { TopicSchema } from '../../src/schema/topic-schema.js';
import type { ObjectStorageConfig } from './config.js';
import type { ParquetScratch } from './parquet-scratch.js';
import type { ManifestObject } from './manifest.js';
import { openRecordFile, type RecordFileWriter } from './record-format.js';

/**
 * One file being filled for one writer shard: records go to a local spill file, and the deliveries it
 * holds are remembered so they can be acked once the object is committed. Its object name is fixed
 * when it opens (Pub/Sub names an object by its creation time). What its manifest entry says of the
 * records is gathered as they come: per key the sequence range, the ids of records recognised by id, and
 * — for a fleet's objects (`detailed`) — every record's id, key and publish time.
 */
export class RollingFile {
  readonly deliveries: ExportMessage[] = [];
  /**
   * Per key, built as the manifest entry holds it (no prototype, so any key is an own property): a Map
   * converted at upload cost ~1 ms per 5,000 keys, on the loop, for every object.
   */
  private readonly keys: ManifestObject['keys'] = Object.create(null) as ManifestObject['keys'];
  private readonly unkeyed: string[] = [];
  private readonly ids: string[] = [];
  private readonly messages: [string, string, number][] = [];
  private closing?: Promise<void>;

  private constructor(
    readonly object: string,
    /** The counter in the object's name. */
    readonly counter: number,
    readonly localPath: string,
    readonly openedAt: Date,
    private readonly writer: RecordFileWriter,
    private readonly detailed: boolean,
  ) {}

  static async open(
    object: string,
    counter: number,
    localPath: string,
    openedAt: Date,
    config: ObjectStorageConfig,
    options: { detailed?: boolean; topicSchema?: () => TopicSchema | undefined; parquetScratch?: ParquetScratch } = {},
  ): Promise<RollingFile> {
    return new RollingFile(
      object,
      counter,
      localPath,
      openedAt,
      await openRecordFile(localPath, config.format, options.topicSchema, options.parquetScratch),
      options.detailed ?? false,
    );
  }

  /**
   * False when the message needs a new file: another topic schema layout (RecordFileWriter.fits), or it
   * would take a file that holds records past maxBytes. As in Pub/Sub, only a message larger than
   * maxBytes makes a file larger than that, alone in it.
   */
  fits(subscription: string, em: ExportMessage, config: ObjectStorageConfig): boolean {
    if (!this.writer.fits(em.message)) return false;
    return !this.records || this.bytes + this.writer.size(subscription, em.message) <= config.maxBytes;
  }

  /**
   * Throws RecordConversionError (the file unchanged) for a message the format cannot take; a promise
   * only when the record file makes the caller wait (RecordFileWriter.append).
   */
  append(subscription: string, em: ExportMessage, mark: RedeliveryMark): void | Promise<void> {
    const written = this.writer.append(subscription, em.message);
    if (written) return written.then(() => this.remember(em, mark));
    this.remember(em, mark);
  }

  /** What the manifest entry will say of a record now in the file. */
  private remember(em: ExportMessage, mark: RedeliveryMark): void {
    this.deliveries.push(em);
    const { orderingKey: key, sequence, messageId, publishTime } = em.message;
    if (this.detailed) {
      this.messages.push([messageId, key, publishTime.getTime()]);
      return;
    }
    if (key === '') {
      this.unkeyed.push(messageId);
      return;
    }
    if (mark.by === 'id') this.ids.push(messageId);
    const range = this.keys[key];
    if (range) {
      range.last = sequence;
      range.count++;
    } else this.keys[key] = { first: sequence, last: sequence, count: 1 };
  }

  get records(): number {
    return this.deliveries.length;
  }

  get bytes(): number {
    return this.writer.bytes;
  }

  /** A file rolls when any limit is reached; a message larger than maxBytes takes it past that. */
  full(config: ObjectStorageConfig): boolean {
    return this.records >= config.maxMessages || this.bytes >= config.maxBytes;
  }

  due(config: ObjectStorageConfig, now: number): boolean {
    return now - this.openedAt.getTime() >= config.maxDurationSeconds * 1000;
  }

  /**
   * Finishes the file (a Parquet file is encoded now, on DuckDB's threads). Every call gets the same
   * promise: the file is sealed in the background, and its upload waits for that close.
   */
  close(): Promise<void> {
    return (this.closing ??= this.writer.close());
  }

  manifestEntry(bucket: string, format: string, bytes: number, worker?: string): ManifestObject {
    const entry: ManifestObject = {
      object: this.object,
      bucket,
      format,
      createdAt: this.openedAt.toISOString(),
      counter: this.counter,
      committedAt: new Date().toISOString(),
      records: this.records,
      bytes,
      keys: this.keys,
      unkeyed: this.unkeyed,
    };
    if (this.ids.length) entry.ids = this.ids;
    if (this.detailed) entry.messages = this.messages;
    if (worker !== undefined) entry.worker = worker;
    return entry;
  }

  async remove(): Promise<void> {
    await rm(this.localPath, { force: true });
  }
}
