import type { DuckDBInstance } from '@duckdb/node-api';
import { parquetReadObjects } from 'hyparquet';
import { rm } from 'node:fs/promises';
import { gunzipSync } from 'node:zlib';
import type { PubsubMessage } from '../../src/core/message.js';
import { duckDbSettings } from '../../src/duckdb/database.js';
import { isDuckDbMemoryError } from '../../src/duckdb/limits.js';
import { oneAtATime } from '../../src/duckdb/one-at-a-time.js';
import { quoteString } from '../../src/duckdb/sql.js';
import { ChunkedFile } from './chunked-file.js';
import type { ParquetScratch } from './parquet-scratch.js';

export type ParquetCompression = 'UNCOMPRESSED' | 'GZIP' | 'SNAPPY';

/** The columns of a Parquet file, name and DuckDB type, with and without metadata. */
export function parquetColumns(writeMetadata: boolean): [name: string, type: string][] {
  if (!writeMetadata) return [['data', 'BLOB']];
  return [
    ['subscription_name', 'VARCHAR'],
    ['message_id', 'VARCHAR'],
    ['publish_time', 'TIMESTAMPTZ'],
    ['attributes', 'VARCHAR'],
    ['data', 'BLOB'],
    ['ordering_key', 'VARCHAR'],
    ['sequence', 'BIGINT'],
  ];
}

/**
 * Files of at least this many payload bytes are written one at a time: each COPY holds its file's data
 * column in one allocation, and such files sealed together (a budget-sized batch seals four of 16 MiB)
 * closing at once ran 100 KB messages out of the memory limit (in one of seven runs of its test). Smaller
 * files still overlap: a fleet worker's 1,000-message files, one at a time, exported at 4.8k msgs/s
 * against 7.5-7.9k.
 */
const SERIAL_COPY_BYTES = 8 * 1024 * 1024;
/** DuckDB's own default; a file with a longer row (a large message) reads with a longer limit. */
const MAX_LINE_BYTES = 2 * 1024 * 1024;

/** One row of the staged file: what `stageRow` writes. */
interface StagedRow {
  m: PubsubMessage;
  attributes: string;
}

const COMMA = 0x2c;
const NEWLINE = 0x0a;
const base64Length = (bytes: number) => Math.ceil(bytes / 3) * 4;

/**
 * A Parquet file written by DuckDB: its rows are staged in a local CSV file and turned into Parquet by
 * one `COPY (SELECT ... FROM read_csv(...)) TO` when the file closes, which DuckDB parses, encodes and
 * compresses on its own threads. The exporter's thread only copies rows into a chunk, as a text export
 * does: DuckDB's appender took about a quarter of a Parquet export's main thread (its calls per value and
 * its flush into a scratch table, 25–110 ms per file on the event loop), and a worker thread owning the
 * appender cost ~30 MiB of RSS (docs/benchmarks.md). Every text column is base64 in the stage, so no byte
 * of a payload, key or attribute can end a field or a row; the staged file is on disk, so a 10 GiB file
 * does not sit in memory.
 */
export class ParquetFile {
  private constructor(
    private readonly scratch: Promise<DuckDBInstance>,
    private readonly stage: ChunkedFile,
    private readonly stagePath: string,
    private readonly path: string,
    private readonly writeMetadata: boolean,
    private readonly compression: ParquetCompression,
  ) {}

  /** Payload bytes appended so far. */
  private bytes = 0;
  private longestRow = 0;
  /** Every row's subscription: one column value per file, written by the COPY rather than per row. */
  private subscription: string | undefined;

  /** `scratch`: the data directory's (acquireParquetScratch), held until this file has closed. */
  static async create(
    scratch: ParquetScratch,
    path: string,
    writeMetadata: boolean,
    compression: ParquetCompression,
  ): Promise<ParquetFile> {
    const stagePath = `${path}.rows`;
    return new ParquetFile(scratch.instance, await ChunkedFile.open(stagePath), stagePath, path, writeMetadata, compression);
  }

  /** `attributes`: the message's attributes as JSON (metadata form only). Returns a promise when it waits for the disk. */
  append(subscription: string, m: PubsubMessage, attributes: string): void | Promise<void> {
    this.bytes += m.data.byteLength;
    if (!this.writeMetadata) return this.add(base64Length(m.data.byteLength) + 1, { m, attributes }, stageData);
    if (this.subscription === undefined) this.subscription = subscription;
    else if (subscription !== this.subscription)
      throw new Error(`a Parquet file of ${this.subscription} cannot take a row of ${subscription}`);
    const size =
      base64Length(Buffer.byteLength(m.messageId)) +
      base64Length(Buffer.byteLength(attributes)) +
      base64Length(m.data.byteLength) +
      base64Length(Buffer.byteLength(m.orderingKey)) +
      // publish_time and sequence, at most 21 characters each; five commas and the newline.
      2 * 21 +
      6;
    return this.add(size, { m, attributes }, stageRow);
  }

  private add(size: number, row: StagedRow, fill: (chunk: Buffer, at: number, row: StagedRow) => number): void | Promise<void> {
    if (size > this.longestRow) this.longestRow = size;
    return this.stage.append(size, row, fill);
  }

  /** Writes the Parquet file (rows in append order) and removes the staged rows. */
  async close(): Promise<void> {
    try {
      await this.stage.close();
      const write = async () => {
        const connection = await (await this.scratch).connect();
        try {
          await connection.run(this.copySql());
        } finally {
          connection.closeSync();
        }
      };
      if (this.bytes < SERIAL_COPY_BYTES) await write();
      else await oneAtATime(await this.scratch, write);
    } catch (e) {
      // DuckDB leaves the file a failed COPY began (0 bytes) at the path the upload reads.
      await rm(this.path, { force: true });
      throw isDuckDbMemoryError(e) ? new ParquetMemoryError(this.path, this.bytes, e) : e;
    } finally {
      await rm(this.stagePath, { force: true });
    }
  }

  private copySql(): string {
    const maxLine = Math.max(MAX_LINE_BYTES, this.longestRow + 1);
    const columns = this.writeMetadata
      ? "{'message_id': 'VARCHAR', 'publish_time': 'BIGINT', 'attributes': 'VARCHAR', 'data': 'VARCHAR', 'ordering_key': 'VARCHAR', 'sequence': 'BIGINT'}"
      : "{'data': 'VARCHAR'}";
    // nullstr: an empty field (an empty key or payload) is an empty value, not NULL.
    const rows =
      `read_csv(${quoteString(this.stagePath)}, header = false, auto_detect = false, delim = ',', quote = '', escape = '', ` +
      `nullstr = '\\N', max_line_size = ${maxLine}, buffer_size = ${maxLine}, columns = ${columns})`;
    const select = this.writeMetadata
      ? `${quoteString(this.subscription ?? '')} AS subscription_name, decode(from_base64(message_id)) AS message_id, ` +
        'make_timestamptz(publish_time) AS publish_time, decode(from_base64(attributes)) AS attributes, from_base64(data) AS data, ' +
        'decode(from_base64(ordering_key)) AS ordering_key, sequence'
      : 'from_base64(data) AS data';
    return `COPY (SELECT ${select} FROM ${rows}) TO ${quoteString(this.path)} (FORMAT parquet, COMPRESSION ${this.compression})`;
  }
}

function stageData(chunk: Buffer, at: number, { m }: StagedRow): number {
  const end = at + chunk.write(m.data.toString('base64'), at, 'latin1');
  chunk[end] = NEWLINE;
  return end + 1;
}

/** message_id, publish_time (µs), attributes, data, ordering_key, sequence. */
function stageRow(chunk: Buffer, at: number, { m, attributes }: StagedRow): number {
  at += chunk.write(Buffer.from(m.messageId).toString('base64'), at, 'latin1');
  chunk[at++] = COMMA;
  at += chunk.write(String(m.publishTime.getTime() * 1000), at, 'latin1');
  chunk[at++] = COMMA;
  at += chunk.write(Buffer.from(attributes).toString('base64'), at, 'latin1');
  chunk[at++] = COMMA;
  at += chunk.write(m.data.toString('base64'), at, 'latin1');
  chunk[at++] = COMMA;
  at += chunk.write(Buffer.from(m.orderingKey).toString('base64'), at, 'latin1');
  chunk[at++] = COMMA;
  at += chunk.write(String(m.sequence), at, 'latin1');
  chunk[at] = NEWLINE;
  return at + 1;
}

/**
 * DuckDB ran out of the Parquet writer's memory limit encoding a file. Its own message ("failed to pin
 * block of size 9.4 MiB ... Possible solutions: SET threads=X ...") named SQL settings a job cannot set, not
 * the job setting that decides: a file of 10 MB messages does not fit in `memory.duckdb: 16MiB`.
 */
export class ParquetMemoryError extends Error {
  constructor(path: string, dataBytes: number, cause: unknown) {
    const limit = duckDbSettings('other').memory_limit;
    super(
      `DuckDB ran out of the Parquet writer's memory limit (memory.duckdb: ${limit}) encoding a file of ${dataBytes} bytes ` +
        `of message data (${path}); the export retries it. A Parquet file is encoded in memory: raise memory.duckdb ` +
        "above the files' size (they roll at a quarter of memory.exportBytes, or at cloudStorageConfig.maxBytes, or " +
        `hold one larger message alone): ${((cause as Error).message ?? String(cause)).split('\n')[0]}`,
      { cause },
    );
    this.name = 'ParquetMemoryError';
  }
}

/** Reads a Parquet object with hyparquet, an implementation independent of the DuckDB that wrote it. */
export async function readParquetRows(body: Buffer): Promise<Record<string, unknown>[]> {
  const file = body.buffer.slice(body.byteOffset, body.byteOffset + body.byteLength) as ArrayBuffer;
  return (await parquetReadObjects({ file, utf8: false, compressors: { GZIP: (input: Uint8Array) => gunzipSync(input) } })) as Record<
    string,
    unknown
  >[];
}
