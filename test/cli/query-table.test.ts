import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { orderly } from '../helpers/cli.js';
import { tempDir } from '../helpers/temp-dir.js';

let dir: ReturnType<typeof tempDir>;
let job: string;

beforeAll(() => {
  dir = tempDir();
  job = join(dir.path, 'job.yaml');
  writeFileSync(job, 'projectId: query-table\ndataDir: ./data\n');
});
afterAll(() => dir.remove());

/** `orderly query`'s table (without --json), as a user reads it. */
describe('orderly query prints its answer as a table', () => {
  it('names every column of an answer without rows, and says it has none', async () => {
    const r = await orderly('query', job, "SELECT 1 AS id, 'x' AS label WHERE false");
    expect(r.code).toBe(0);
    expect(r.stdout.split('\n')[1]).toBe('│ id │ label │');
    expect(r.stdout.trim().endsWith('(0 rows)')).toBe(true);
  });

  it('prints nested values whole, as JSON, NULL as NULL and a string without quotes', async () => {
    const r = await orderly(
      'query',
      job,
      "SELECT {'a': {'b': [{'c': [1, 2]}]}} AS nested, NULL AS missing, 'it''s' AS text, 'two\nlines' AS broken",
    );
    expect(r.code).toBe(0);
    const lines = r.stdout.split('\n');
    expect(lines[1]!.split('│').map((s) => s.trim())).toEqual(['', 'nested', 'missing', 'text', 'broken', '']);
    expect(lines[3]!.split('│').map((s) => s.trim())).toEqual(['', '{"a":{"b":[{"c":[1,2]}]}}', 'NULL', "it's", 'two\\nlines', '']);
    expect(lines[5]).toBe('(1 row)');
  });
});
