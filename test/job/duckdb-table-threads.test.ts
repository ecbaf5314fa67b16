import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { stringify } from 'yaml';
import { loadJob } from '../../src/job/job-config.js';
import { JobRuntime, type JobMode } from '../../src/job/job-runtime.js';
import { queryJob } from '../../src/job/query.js';
import { createLogger } from '../../src/log.js';
import { tempDirPerTest } from '../helpers/temp-dir-per-test.js';

const dir = tempDirPerTest();

/** DuckDB's thread count on the instance a query of the job reaches: the table database's, when the job names one. */
async function threads(name: string, job: Record<string, unknown>, mode: JobMode): Promise<unknown> {
  const file = join(dir.path, `${name}.yaml`);
  writeFileSync(file, stringify({ dataDir: `./${name}`, topics: [{ name: 'events' }], ...job }));
  const runtime = await JobRuntime.start(loadJob(file), createLogger({ level: 'silent' }), { mode });
  try {
    const [row] = await queryJob(runtime, "SELECT current_setting('threads')::INTEGER AS threads");
    return row?.threads;
  } finally {
    await runtime.stop();
  }
}

it("runs a table export's database on memory.duckdbTableThreads (1 unset), every other instance on memory.duckdbThreads", async () => {
  const tables = (name: string) => ({ duckdb: { path: `./${name}/export.duckdb` } });
  expect(await threads('unset', tables('unset'), 'run')).toBe(1);
  const memory = { duckdbThreads: 3, duckdbTableThreads: 2 };
  expect(await threads('set', { ...tables('set'), memory }, 'run')).toBe(2);
  // The job's own query database (no table database named), and a process that exports nothing (query --write).
  expect(await threads('bare', { memory }, 'run')).toBe(3);
  expect(await threads('inspect', { ...tables('inspect'), memory }, 'inspect')).toBe(3);
});
