import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import type { ExportMessage } from '../../src/connector/connector.js';
import { closeDuckDb, queryDuckDb, setDuckDbLimits } from '../../src/duckdb/database.js';
import { tempDir } from '../../test/helpers/temp-dir.js';
import { keyedExportMessage, writerContext } from '../../test/helpers/writer-context.js';
import { parseDuckDbTableConfig } from './config.js';
import { DuckDbTableWriter } from './table-writer.js';

let dir: ReturnType<typeof tempDir>;
let path: string;

beforeEach(() => {
  dir = tempDir();
  path = join(dir.path, 'export.duckdb');
});
afterEach(async () => {
  setDuckDbLimits({ tableMemoryLimit: '32MiB' });
  await closeDuckDb(path);
  dir.remove();
});

/** A 100 KB message: DuckDB keeps rows this large pinned until a checkpoint, which needs the whole row group in memory. */
function largeMessage(sequence: number): ExportMessage {
  const em = keyedExportMessage('k', sequence);
  return { ...em, message: { ...em.message, data: Buffer.from(`${sequence}:${'x'.repeat(100_000)}`) } };
}

async function openWriter(table: string, config: { useTableSchema?: boolean } = {}): Promise<DuckDbTableWriter> {
  const writer = new DuckDbTableWriter(
    parseDuckDbTableConfig({ table: `p.main.${table}`, ...config }),
    writerContext(table, { dataDir: dir.path }),
    path,
  );
  await writer.open();
  return writer;
}

/** Writes `messages` in batches of `batch` and flushes; the error that stopped it, if any. */
async function writeAll(writer: DuckDbTableWriter, messages: ExportMessage[], batch: number): Promise<unknown> {
  try {
    for (let i = 0; i < messages.length; i += batch) await writer.write(messages.slice(i, i + batch));
    await writer.flush('all');
    return undefined;
  } catch (e) {
    return e;
  } finally {
    await writer.close();
  }
}

describe('a table export at its DuckDB memory limit', () => {
  it('reports the memory limit as the cause and, once memory allows, writes again after reopening (the database is not left invalidated)', async () => {
    setDuckDbLimits({ tableMemoryLimit: '16MiB' });
    await queryDuckDb(path, 'CREATE TABLE big(data VARCHAR)');
    const messages = Array.from({ length: 400 }, (_, i) => largeMessage(i + 1));
    const failure = await writeAll(await openWriter('big'), messages, 20);
    expect((failure as Error).name).toBe('DuckDbMemoryError');
    expect((failure as Error).message).toMatch(/memory\.duckdbTables: 16MiB\) writing table p\.main\.big/);

    // Memory enough now (the cause could as well have been another user of the instance): a new writer
    // opens a new instance, and what the first one committed is recognised, not written twice.
    setDuckDbLimits({ tableMemoryLimit: '256MiB' });
    expect(await writeAll(await openWriter('big'), messages, 50)).toBeUndefined();
    const [counts] = await queryDuckDb(path, 'SELECT count(*) AS n, count(DISTINCT data) AS d FROM big');
    expect(counts).toEqual({ n: 400n, d: 400n });
  });

  it("names what a wide table's columns need: 120 small columns ran out at 32 MiB, the reason naming only messages over ~10 KB", async () => {
    const columns = Array.from({ length: 120 }, (_, i) => `c${i}`);
    await queryDuckDb(path, `CREATE TABLE wide(${columns.map((c) => `${c} INTEGER`).join(', ')})`);
    // ~1 KB each: well under the ~10 KB the reason named.
    const messages = Array.from({ length: 4000 }, (_, i) => {
      const em = keyedExportMessage('k', i + 1);
      return { ...em, message: { ...em.message, data: Buffer.from(JSON.stringify(Object.fromEntries(columns.map((c) => [c, i])))) } };
    });
    const failure = await writeAll(await openWriter('wide', { useTableSchema: true }), messages, 500);
    expect((failure as Error).name).toBe('DuckDbMemoryError');
    expect((failure as Error).message).toContain('its 120 stored columns need about 60 MiB by themselves');

    setDuckDbLimits({ tableMemoryLimit: '128MiB' });
    expect(await writeAll(await openWriter('wide', { useTableSchema: true }), messages, 500)).toBeUndefined();
    expect(await queryDuckDb(path, 'SELECT count(*) AS n, count(DISTINCT c0) AS d FROM wide')).toEqual([{ n: 4000n, d: 4000n }]);
  });
});
