import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { tempDir } from '../../test/helpers/temp-dir.js';
import { ParquetFile } from './parquet-file.js';
import { acquireParquetScratch } from './parquet-scratch.js';

/** The process's threads (Linux): DuckDB's workers among them while an instance runs. */
const threads = () => readdirSync('/proc/self/task').length;

/**
 * DuckDB's `closeSync` joins its worker threads, each returning its memory as it exits: at the end of a
 * 1M-message Parquet drain the event loop waited 50-100 ms for them. The scratch stops them first, with a
 * query that runs off the loop, so none is left for closeSync to wait on.
 */
it("stops DuckDB's worker threads before closing the scratch instance", async () => {
  const dir = tempDir();
  try {
    const scratch = acquireParquetScratch(dir.path);
    const file = await ParquetFile.create(scratch, join(dir.path, 'a.parquet'), true, 'SNAPPY');
    for (let i = 0; i < 3000; i++) {
      const m = {
        messageId: `m-${i}`,
        publishTime: new Date(),
        data: Buffer.alloc(100, i % 251),
        attributes: {},
        orderingKey: `k${i % 7}`,
        sequence: i + 1,
      };
      await file.append('projects/p/subscriptions/s', m, '{}');
    }
    await file.close();
    const instance = await scratch.instance;
    const closeSync = instance.closeSync.bind(instance);
    let atClose: number | undefined;
    instance.closeSync = () => {
      atClose = threads();
      closeSync();
    };
    await scratch.release();
    // Every thread the instance had was gone already when closeSync ran.
    expect(atClose).toBe(threads());
  } finally {
    dir.remove();
  }
});
