import { DuckDBInstance, timestampTZValue, type DuckDBAppender, type DuckDBConnection } from '@duckdb/node-api';
import { parquetReadObjects } from 'hyparquet';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import type { PubsubMessage } from '../../src/core/message.js';
import { duckDbSettings } from '../../src/duckdb/database.js';
import { isDuckDbMemoryError } from '../../src/duckdb/limits.js';
import { oneAtATime } from '../../src/duckdb/one-at-a-time.js';
import { quoteString } from '../../src/duckdb/sql.js';

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

let scratch: Promise<DuckDBInstance> | undefined;
let tables = 0;
/**
 * Files of at least this many payload bytes are written one at a time: each COPY holds its file's data
 * column in one allocation beside the tables, and such files sealed together (a budget-sized batch seals
 * four of 16 MiB) closing at once ran 100 KB messages out of the memory limit (in one of seven runs of its
 * test). Smaller files still overlap: a fleet worker's 1,000-message files, one at a time, exported at
 * 4.8k msgs/s against 7.5-7.9k.
 */
const SERIAL_COPY_BYTES = 8 * 1024 * 1024;

function scratchDb(): Promise<DuckDBInstance> {
  // DuckDB creates the directory only if it ever spills.
  const spill = join(tmpdir(), `orderly-parquet-${process.pid}`);
  scratch ??= DuckDBInstance.create(':memory:', duckDbSettings('other', { temp_directory: spill, preserve_insertion_order: 'true' }));
  return scratch;
}

/**
 * A Parquet file written by DuckDB: its rows are appended to a scratch table of an in-memory DuckDB
 * (spilling to a temp directory past its memory limit, so a 10 GiB file does not sit in memory) and
 * written by `COPY ... TO` when the file closes. DuckDB encodes and compresses on its own threads, much
 * faster than parquetjs-lite did on the exporter's thread (docs/benchmarks.md).
 */
export class ParquetFile {
  private constructor(
    private readonly connection: DuckDBConnection,
    private readonly table: string,
    private readonly appender: DuckDBAppender,
    private readonly path: string,
    private readonly writeMetadata: boolean,
    private readonly compression: ParquetCompression,
  ) {}

  /** Payload bytes appended so far. */
  private bytes = 0;

  static async create(path: string, writeMetadata: boolean, compression: ParquetCompression): Promise<ParquetFile> {
    const connection = await (await scratchDb()).connect();
    const table = `file_${++tables}`;
    const columns = parquetColumns(writeMetadata).map(([name, type]) => `${name} ${type}`);
    await connection.run(`CREATE TABLE ${table}(${columns.join(', ')})`);
    return new ParquetFile(connection, table, await connection.createAppender(table), path, writeMetadata, compression);
  }

  /** `attributes`: the message's attributes as JSON (metadata form only). */
  append(subscription: string, m: PubsubMessage, attributes: string): void {
    const a = this.appender;
    this.bytes += m.data.byteLength;
    if (this.writeMetadata) {
      a.appendVarchar(subscription);
      a.appendVarchar(m.messageId);
      a.appendTimestampTZ(timestampTZValue(BigInt(m.publishTime.getTime()) * 1000n));
      a.appendVarchar(attributes);
      a.appendBlob(m.data);
      a.appendVarchar(m.orderingKey);
      a.appendBigInt(BigInt(m.sequence));
    } else {
      a.appendBlob(m.data);
    }
    a.endRow();
  }

  /** Writes the Parquet file (rows in append order) and frees the scratch table. */
  async close(): Promise<void> {
    try {
      this.appender.closeSync();
      const write = async () => {
        await this.connection.run(`COPY ${this.table} TO ${quoteString(this.path)} (FORMAT parquet, COMPRESSION ${this.compression})`);
      };
      if (this.bytes < SERIAL_COPY_BYTES) await write();
      else await oneAtATime(await scratchDb(), write);
    } catch (e) {
      throw isDuckDbMemoryError(e) ? new ParquetMemoryError(this.path, this.bytes, e) : e;
    } finally {
      await this.connection.run(`DROP TABLE IF EXISTS ${this.table}`);
      this.connection.closeSync();
    }
  }
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
