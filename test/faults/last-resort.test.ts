import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait-for.js';

const worker = fileURLToPath(new URL('./last-resort-worker.ts', import.meta.url));

describe('the last resort of run and serve (issue #9.1)', () => {
  it('an unhandled rejection and an uncaught exception are logged with their stacks and counted; the process keeps serving', async () => {
    const dir = tempDir();
    const child = spawn(process.execPath, ['--import', 'tsx', worker, dir.path], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c) => (out += c));
    child.stderr.on('data', (c) => (out += c));
    try {
      await waitFor('the worker to survive both errors', () => out.includes('ALIVE') || child.exitCode !== null, 30_000);
      expect(child.exitCode, out).toBeNull();
      const logs = out
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { level: number; msg: string; err?: { message: string; stack: string } });
      const errors = logs.filter((l) => l.level === 50);
      expect(errors.map((l) => l.err?.message)).toEqual(['a rejection nobody handles', 'an exception nobody catches']);
      for (const e of errors) expect(e.err?.stack).toContain('last-resort-worker.ts');
      const url = /METRICS (\S+)/.exec(out)![1]!;
      const metrics = await (await fetch(`${url}/metrics`)).text();
      expect(metrics).toMatch(/^orderly_unexpected_errors_total 2$/m);
    } finally {
      child.kill('SIGKILL');
      dir.remove();
    }
  });
});
