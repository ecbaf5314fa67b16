import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { PubsubMessage } from '../../src/core/message.js';
import { setDuckDbLimits } from '../../src/duckdb/limits.js';
import { tempDir } from '../../test/helpers/temp-dir.js';
import { ParquetFile } from './parquet-file.js';
import { acquireParquetScratch } from './parquet-scratch.js';

const dir = tempDir();
afterAll(() => dir.remove());

function message(id: number, bytes: number): PubsubMessage {
  return { messageId: String(id), publishTime: new Date(), data: Buffer.alloc(bytes, id), attributes: {}, orderingKey: 'k', sequence: id };
}

describe('a Parquet file larger than the writer memory limit (memory.duckdb)', () => {
  it('fails naming memory.duckdb and its value, not DuckDB advice to SET threads a job cannot give', async () => {
    // The scratch database takes the limits set before it is opened.
    setDuckDbLimits({ memoryLimit: '16MiB' });
    const scratch = acquireParquetScratch(dir.path);
    const file = await ParquetFile.create(scratch, join(dir.path, 'big.parquet'), true, 'SNAPPY');
    await file.append('projects/p/subscriptions/s', message(1, 9_900_000), '{}');
    await file.append('projects/p/subscriptions/s', message(2, 9_900_000), '{}');
    // Before: "Out of Memory Error: failed to pin block of size 9.4 MiB ... Possible solutions: * Reducing
    // the number of threads (SET threads=X) ...", as the subscription's RESOURCE_ERROR reason.
    await expect(file.close()).rejects.toThrow(/memory\.duckdb: 16MiB\) encoding a file of 19800000 bytes/);
    // DuckDB's COPY had left the file it began, 0 bytes, where the object writer looks for the finished one.
    expect(existsSync(join(dir.path, 'big.parquet'))).toBe(false);
    await scratch.release();
  });
});
