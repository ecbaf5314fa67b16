import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { loadJob } from '../../src/job/job-config.js';
import { tempDirPerTest } from '../helpers/temp-dir-per-test.js';

const dir = tempDirPerTest();

function problems(job: Record<string, unknown>): string[] {
  const file = join(dir.path, 'job.yaml');
  writeFileSync(file, stringify({ topics: [{ name: 'events' }], ...job }));
  try {
    loadJob(file, {});
  } catch (e) {
    return (e as { problems: string[] }).problems;
  }
  return [];
}

// duckdb: and objectStorage: belong to the built-in connectors, which declare them through the registry;
// the job file reads as it always did.
describe("the built-in connectors' settings sections", () => {
  it.each<[string, Record<string, unknown>, string[]]>([
    ['a wrong type in duckdb', { duckdb: { path: 3 } }, ['duckdb.path: Invalid input: expected string, received number']],
    [
      'a typo in objectStorage',
      { objectStorage: { embeded: true } },
      ['objectStorage.embeded: unknown key (a typo? see docs/configuration.md)'],
    ],
    ['a section that is not a mapping', { objectStorage: 'minio' }, ['objectStorage: Invalid input: expected object, received string']],
    [
      'problems in the job and in both sections, all at once',
      { colour: 'red', duckdb: {}, objectStorage: { buckets: 'x' } },
      [
        'colour: unknown key (a typo? see docs/configuration.md)',
        'duckdb.path: Invalid input: expected string, received undefined',
        'objectStorage.buckets: Invalid input: expected array, received string',
      ],
    ],
  ])('%s', (_what, job, expected) => {
    expect(problems(job)).toEqual(expected);
  });

  it('valid sections are kept by key, with defaults, and relative paths resolved next to the job file', () => {
    const file = join(dir.path, 'job.yaml');
    writeFileSync(file, stringify({ duckdb: { path: './db/x.duckdb' }, objectStorage: { embedded: true } }));
    expect(loadJob(file).sections).toEqual({
      duckdb: { path: join(dir.path, 'db', 'x.duckdb'), init: [] },
      objectStorage: { embedded: true, buckets: [] },
    });
  });
});
