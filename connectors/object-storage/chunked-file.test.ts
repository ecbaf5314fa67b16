import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { tempDir } from '../../test/helpers/temp-dir.js';
import { ChunkedFile } from './chunked-file.js';

const dir = tempDir();
afterAll(() => dir.remove());

const copy = (chunk: Buffer, at: number, record: Buffer) => at + record.copy(chunk, at);

describe('a chunked file', () => {
  it('holds its records in append order across chunks, a record larger than a chunk included', async () => {
    const path = join(dir.path, 'records');
    const file = await ChunkedFile.open(path);
    const records = [700_000, 700_000, 3_000_000, 10, 900_000, 900_000, 900_000].map((n, i) => Buffer.alloc(n, i + 1));
    for (const r of records) await file.append(r.byteLength, r, copy);
    await file.close();
    expect(readFileSync(path).equals(Buffer.concat(records))).toBe(true);
  });

  it('refuses a record appended while the previous one waits for the disk, rather than interleaving them', async () => {
    const file = await ChunkedFile.open(join(dir.path, 'refused'));
    const big = Buffer.alloc(2 * 1024 * 1024, 1);
    const waiting = file.append(big.byteLength, big, copy);
    expect(waiting).toBeInstanceOf(Promise);
    expect(() => file.append(1, Buffer.from('x'), copy)).toThrow(/while the previous one waited/);
    await waiting;
    await file.close();
  });
});
