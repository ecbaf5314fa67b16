import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { orderly, orderlyBin } from '../helpers/cli.js';
import { tempDir } from '../helpers/temp-dir.js';

/**
 * Runs the CLI with `stream` piped to a reader that goes away early, as `orderly ... | head -1` does:
 * after the first chunk (or at once, with `afterFirstChunk: false`).
 */
function runWithClosedOutput(
  args: string[],
  stream: 'stdout' | 'stderr',
  afterFirstChunk: boolean,
): Promise<{ code: number | null; signal: string | null; other: string; received: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [orderlyBin, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    const closing = child[stream];
    let received = 0;
    let other = '';
    child[stream === 'stdout' ? 'stderr' : 'stdout'].on('data', (c) => (other += c));
    if (afterFirstChunk) {
      closing.once('data', (c: Buffer) => {
        received = c.length;
        closing.destroy();
      });
    } else closing.destroy();
    const limit = setTimeout(() => child.kill('SIGKILL'), 90_000);
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      clearTimeout(limit);
      resolve({ code, signal, other, received });
    });
  });
}

let dir: ReturnType<typeof tempDir>;
let job: string;
beforeAll(async () => {
  dir = tempDir();
  job = join(dir.path, 'job.yaml');
  writeFileSync(
    job,
    stringify({
      dataDir: './data',
      objectStorage: { embedded: true, buckets: ['files'] },
      topics: [{ name: 'events' }],
      subscriptions: [{ name: 'to-files', topic: 'events', cloudStorageConfig: { bucket: 'files', avroConfig: { writeMetadata: true } } }],
    }),
  );
  // The job's store and subscriptions: an audit refuses a job that never ran.
  expect((await orderly('status', job)).code).toBe(0);
}, 60_000);
afterAll(() => dir.remove());

describe('a reader that goes away (orderly ... | head)', () => {
  it.each<[string, string[]]>([
    ['audit', ['audit', '<job>', 'to-files']],
    ['status', ['status', '<job>']],
    ['validate', ['validate', '<job>', '--json']],
    ['--help', ['--help']],
  ])(
    '%s with stdout closed before it writes: exits 0, no stack trace',
    async (_what, args) => {
      const r = await runWithClosedOutput(
        args.map((a) => (a === '<job>' ? job : a)),
        'stdout',
        false,
      );
      expect(r.other).toBe('');
      expect(r).toMatchObject({ code: 0, signal: null });
    },
    120_000,
  );

  it('query with stdout closed after its first chunk of a long answer: exits 0, no stack trace', async () => {
    const r = await runWithClosedOutput(
      ['query', job, 'SELECT range AS n, md5(range::VARCHAR) AS h FROM range(200000)', '--json'],
      'stdout',
      true,
    );
    expect(r.received).toBeGreaterThan(0);
    expect(r.other).toBe('');
    expect(r).toMatchObject({ code: 0, signal: null });
  }, 120_000);

  it('an error report with stderr closed keeps its exit code (2: invalid job file), no crash', async () => {
    const bad = join(dir.path, 'bad.yaml');
    writeFileSync(bad, 'topics: [{ name: 1bad }]\n');
    const r = await runWithClosedOutput(['validate', bad], 'stderr', false);
    expect(r).toMatchObject({ code: 2, signal: null, other: '' });
  }, 120_000);
});
