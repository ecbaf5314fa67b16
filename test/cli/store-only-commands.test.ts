import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { orderlyBin } from '../helpers/cli.js';
import { tempDir } from '../helpers/temp-dir.js';

const exec = promisify(execFile);
const dir = tempDir('orderly-store-only-');
afterEach(() => dir.remove());

/**
 * Runs the CLI with a module resolve hook that writes down every module the process imports; resolves
 * with its stdout and the packages it loaded (node_modules folders; the CLI's own modules are left out).
 */
async function orderlyLoading(...args: string[]): Promise<{ stdout: string; packages: Set<string> }> {
  const log = join(dir.path, `imports-${args[0]}.log`);
  writeFileSync(log, '');
  const hooks = `import { appendFileSync } from 'node:fs';
    export async function resolve(specifier, context, next) {
      const resolved = await next(specifier, context);
      appendFileSync(${JSON.stringify(log)}, resolved.url + '\\n');
      return resolved;
    }`;
  const register = `import { register } from 'node:module'; register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(hooks)}`)});`;
  const { stdout } = await exec(
    process.execPath,
    ['--import', `data:text/javascript,${encodeURIComponent(register)}`, orderlyBin, ...args],
    {
      encoding: 'utf8',
      timeout: 60_000,
    },
  );
  const packages = new Set(
    readFileSync(log, 'utf8')
      .split('\n')
      .flatMap((url) => /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)?.[1] ?? []),
  );
  return { stdout, packages };
}

it("an offline publish and status open only the store: not the job's DuckDB database nor its embedded S3 server (~2 s of every call)", async () => {
  const job = join(dir.path, 'job.yaml');
  writeFileSync(
    job,
    stringify({
      projectId: 'store-only',
      dataDir: './data',
      duckdb: { path: './data/export.duckdb', init: ['CREATE TABLE IF NOT EXISTS events(data VARCHAR)'] },
      objectStorage: { embedded: true, buckets: ['files'] },
      topics: [{ name: 'events' }],
      subscriptions: [
        { name: 'to-table', topic: 'events', enableMessageOrdering: true, bigqueryConfig: { table: 'store-only.main.events' } },
        { name: 'to-files', topic: 'events', enableMessageOrdering: true, cloudStorageConfig: { bucket: 'files', textConfig: {} } },
      ],
    }),
  );
  writeFileSync(join(dir.path, 'events.jsonl'), '{"n":1}\n{"n":2}\n{"n":3}\n');
  const unused = ['@duckdb/node-api', 's3rver'];

  const published = await orderlyLoading('publish', job, '--topic', 'events', '--file', join(dir.path, 'events.jsonl'), '--json');
  expect(JSON.parse(published.stdout)).toEqual({ published: 3, refused: [] });
  expect(unused.filter((name) => published.packages.has(name))).toEqual([]);
  expect(published.packages).toContain('better-sqlite3'); // the hook saw the store's packages load

  const status = await orderlyLoading('status', job, '--json');
  const rows = JSON.parse(status.stdout) as { subscription: string; backlog: number }[];
  expect(rows.map((r) => [r.subscription, r.backlog])).toEqual([
    ['projects/store-only/subscriptions/to-files', 3],
    ['projects/store-only/subscriptions/to-table', 3],
  ]);
  expect(unused.filter((name) => status.packages.has(name))).toEqual([]);
});
