import { execFile, spawn } from 'node:child_process';
import { copyFileSync, cpSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait-for.js';
import { writeLockForTarball } from './example-install.js';

const exec = promisify(execFile);
const repo = fileURLToPath(new URL('../..', import.meta.url));
const MESSAGES = 200;

let dir: ReturnType<typeof tempDir>;
let example: string;

/** Runs a command; resolves with its output and exit code (never rejects on a non-zero exit). */
async function run(command: string, args: string[], cwd: string): Promise<{ stdout: string; stderr: string; code: number }> {
  try {
    const { stdout, stderr } = await exec(command, args, { cwd, encoding: 'utf8', timeout: 120_000, maxBuffer: 16 * 1024 * 1024 });
    return { stdout, stderr, code: 0 };
  } catch (e) {
    const err = e as { stdout: string; stderr: string; code: number };
    return { stdout: err.stdout, stderr: err.stderr, code: err.code };
  }
}
/** The installed package's CLI, as `npx orderly` runs it in the example's folder. */
const orderly = (...args: string[]) =>
  run(process.execPath, [join(example, 'node_modules', 'orderly', 'bin', 'orderly.js'), ...args], example);

// The example connector depends on Orderly by package name, as any third-party connector would: pack
// Orderly (dist/ is built by the global setup), install the tarball into a copy of the example, build the
// example against the package's types, and run the example's own tests and a job from that folder.
beforeAll(async () => {
  dir = tempDir('orderly-package-');
  const pack = await run('npm', ['pack', '--ignore-scripts', '--pack-destination', dir.path], repo);
  expect(pack.code, pack.stderr).toBe(0);
  const tarball = join(dir.path, pack.stdout.trim().split('\n').pop()!);
  example = join(dir.path, 'example');
  cpSync(join(repo, 'examples', 'jsonl-file-connector'), example, {
    recursive: true,
    filter: (path) => !/[/\\](node_modules|dist|data|out)$/.test(path),
  });
  writeLockForTarball(repo, example, tarball);
  // From the npm cache, without install scripts: the one package that needs its script, better-sqlite3,
  // would compile SQLite for minutes; its binary is the one this repository built, for the same version.
  const install = await run('npm', ['ci', '--prefer-offline', '--ignore-scripts', '--no-audit', '--no-fund'], example);
  expect(install.code, install.stderr).toBe(0);
  const binary = ['build', 'Release', 'better_sqlite3.node'];
  const sqlite = dirname(createRequire(join(repo, 'package.json')).resolve('better-sqlite3/package.json'));
  const installed = join(example, 'node_modules', 'better-sqlite3');
  const version = (folder: string) => (JSON.parse(readFileSync(join(folder, 'package.json'), 'utf8')) as { version: string }).version;
  expect(version(installed)).toBe(version(sqlite));
  mkdirSync(join(installed, ...binary.slice(0, -1)), { recursive: true });
  copyFileSync(join(sqlite, ...binary), join(installed, ...binary));
}, 180_000);
afterAll(() => dir?.remove());

describe('Orderly as a package, used from outside by an example connector', () => {
  it('the example builds against the package types and passes the conformance suite (orderly/testing)', async () => {
    const build = await run(process.execPath, [join(example, 'node_modules', 'typescript', 'bin', 'tsc')], example);
    expect(build.code, build.stdout + build.stderr).toBe(0);
    const tests = await run(process.execPath, ['--test', 'dist/test/'], example);
    expect(tests.code, tests.stdout + tests.stderr).toBe(0);
    expect(tests.stdout).toMatch(/# pass 5\b/);
    expect(tests.stdout).toMatch(/# fail 0\b/);
  }, 120_000);

  it('an orderly other than the one the plugin imports names that other copy, not an unknown connector', async () => {
    // This repository's own CLI is another installation than the example's node_modules/orderly, which
    // the example's plugin imports: the plugin loads, but registers into that copy.
    const valid = await run(process.execPath, [join(repo, 'bin', 'orderly.js'), 'validate', 'job.yaml'], example);
    expect(valid.code).toBe(2);
    expect(valid.stderr).toContain(
      `connector "jsonl-file" was registered into another copy of Orderly (${join(example, 'node_modules', 'orderly')})`,
    );
    expect(valid.stderr).toContain('npx orderly');
  }, 60_000);

  it('orderly run exports through the connector its job file loads (plugins:), with its settings section, counter, query view and audit', async () => {
    expect(existsSync(join(example, 'dist', 'src', 'index.js'))).toBe(true); // built by the test before
    const valid = await orderly('validate', 'job.yaml', '--json');
    expect(JSON.parse(valid.stdout)).toEqual({ valid: true, topics: 1, subscriptions: 1, schemas: 0 });
    const events = Array.from({ length: MESSAGES }, (_, i) => JSON.stringify({ user: `u${i % 7}`, i }));
    writeFileSync(join(example, 'events.jsonl'), events.join('\n') + '\n');
    const published = await orderly(
      'publish',
      'job.yaml',
      '--topic',
      'events',
      '--file',
      'events.jsonl',
      '--ordering-key-field',
      'user',
      '--json',
    );
    expect(JSON.parse(published.stdout)).toEqual({ published: MESSAGES, refused: [] });

    const child = spawn(process.execPath, [join(example, 'node_modules', 'orderly', 'bin', 'orderly.js'), 'run', 'job.yaml'], {
      cwd: example,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    // The section's directory (jsonlFile.directory: ./out) holds the file.
    const out = join(example, 'out', 'events.jsonl');
    const lines = () => (existsSync(out) ? readFileSync(out, 'utf8').split('\n').filter(Boolean).length : 0);
    try {
      await waitFor('the export', () => lines() === MESSAGES, 30_000);
      const status = JSON.parse((await orderly('status', 'job.yaml', '--json')).stdout) as {
        backlog: number;
        exportCounters?: Record<string, number>;
      }[];
      expect(status).toMatchObject([{ backlog: 0, exportCounters: { linesWritten: MESSAGES } }]);
      const { metrics } = JSON.parse(readFileSync(join(example, 'data', 'orderly.lock'), 'utf8')) as { metrics: string };
      expect(await (await fetch(`${metrics}/metrics`)).text()).toContain(
        `orderly_jsonl_lines_written_total{subscription="events-to-file"} ${MESSAGES}`,
      );
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited, stderr).toBe(0);

    const query = await orderly('query', 'job.yaml', 'SELECT count(*) AS n, count(DISTINCT key) AS keys FROM events_to_file', '--json');
    expect(JSON.parse(query.stdout), query.stderr).toEqual([{ n: String(MESSAGES), keys: '7' }]);
    const audit = await orderly('audit', 'job.yaml', 'events-to-file', '--json');
    expect(audit.code, audit.stderr).toBe(0);
    expect(JSON.parse(audit.stdout)).toEqual({ lines: MESSAGES, keys: 7, outOfOrder: [], duplicates: [], missing: [] });
  }, 120_000);
});
