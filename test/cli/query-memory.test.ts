import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { orderly } from '../helpers/cli.js';
import { tempDirPerTest } from '../helpers/temp-dir-per-test.js';

const dir = tempDirPerTest();

/** 100,000 rows of ~1 KB: more than a 64 MiB limit holds as one row group of DuckDB's Parquet writer. */
const ROWS = "SELECT i, repeat('x', 1000) || i AS s FROM range(100000) t(i)";

describe('orderly query --write out of memory.duckdb', () => {
  it('says which setting ran out and how a Parquet COPY fits, and the COPY with smaller row groups writes every row', async () => {
    const job = join(dir.path, 'job.yaml');
    writeFileSync(job, 'projectId: query-memory\ndataDir: ./data\nmemory: { duckdb: 64MiB }\n');
    const file = join(dir.path, 'x.parquet');

    const failed = await orderly('query', job, '--write', `COPY (${ROWS}) TO '${file}' (FORMAT parquet)`);
    expect(failed.code).toBe(1);
    // Before: DuckDB's own text alone, "Out of Memory Error: failed to allocate data of size 128.0 MiB ...
    // Possible solutions: * Reducing the number of threads (SET threads=X) ...".
    expect(failed.stderr).toMatch(
      /^orderly: the query ran out of DuckDB's memory limit \(64MiB, the job file's memory\.duckdb\): raise it/,
    );
    expect(failed.stderr).toContain('(FORMAT parquet, ROW_GROUP_SIZE 16384)');
    expect(failed.stderr).not.toContain('Possible solutions');

    const written = await orderly(
      'query',
      job,
      '--write',
      `COPY (${ROWS}) TO '${file}' (FORMAT parquet, ROW_GROUP_SIZE 16384); SELECT count(DISTINCT i)::INTEGER AS n FROM '${file}'`,
      '--json',
    );
    expect(written.code, written.stderr).toBe(0);
    expect(JSON.parse(written.stdout)).toEqual([{ n: 100_000 }]);
  });
});
