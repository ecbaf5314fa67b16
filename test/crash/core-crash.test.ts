import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/temp-dir.js';

const worker = fileURLToPath(new URL('./core-worker.ts', import.meta.url));

interface Line {
  tag: string;
  id: string;
  key: string;
  seq: number;
}

/** Confirmed publishes a round makes before its kill clock starts: six rounds make more than the 100 checked. */
const PUBLISHED_BEFORE_KILL = 20;

/** Runs the worker; kills it with SIGKILL after `killAfterMs`, or waits for it to finish. */
function runWorker(dir: string, mode: 'run' | 'drain', killAfterMs?: number): Promise<Line[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', worker, dir, mode], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => (stdout += c));
    child.stderr.on('data', (c) => (stderr += c));
    let killer: NodeJS.Timeout | undefined;
    // Start the kill clock once the worker has confirmed PUBLISHED_BEFORE_KILL publishes, so every round does
    // real work before it dies however loaded the machine is (a clock started at its first line left rounds
    // with almost nothing published under load).
    child.stdout.on('data', () => {
      if (killAfterMs === undefined || killer) return;
      const confirmed = `\n${stdout}`.split('\nP ').length - 1;
      if (confirmed >= PUBLISHED_BEFORE_KILL) killer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
    });
    const limit = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('exit', (code, signal) => {
      clearTimeout(limit);
      if (killer) clearTimeout(killer);
      if (mode === 'drain' && code !== 0) return reject(new Error(`drain worker failed (${code ?? signal}): ${stderr}`));
      if (mode === 'run' && signal !== 'SIGKILL') return reject(new Error(`worker ended without being killed (${code}): ${stderr}`));
      const lines = stdout.split('\n').slice(0, -1); // the last, partial line may be cut by the kill
      resolve(
        lines
          .filter((l) => l !== 'DONE')
          .map((l) => {
            const [tag, id, key, seq] = l.split(' ');
            return { tag: tag!, id: id!, key: key!, seq: Number(seq) };
          }),
      );
    });
  });
}

describe('crash safety (SIGKILL of a publishing and consuming process)', () => {
  it('loses no confirmed publish, keeps per-key order, and redelivers from the first unacked message', async () => {
    const dir = tempDir('orderly-crash-');
    try {
      const runs: Line[][] = [];
      for (let round = 0; round < 6; round++) runs.push(await runWorker(dir.path, 'run', 150 + Math.floor(Math.random() * 600)));
      runs.push(await runWorker(dir.path, 'drain'));

      const published = new Set(
        runs
          .flat()
          .filter((l) => l.tag === 'P')
          .map((l) => l.id),
      );
      const delivered = new Set(
        runs
          .flat()
          .filter((l) => l.tag === 'D')
          .map((l) => l.id),
      );
      expect(published.size).toBeGreaterThan(100);
      // An ack may commit and the process die before it prints "A", so "not lost" means: delivered, and
      // the drain run (which exits only on an empty backlog) found nothing left unacked.
      for (const id of published) expect(delivered.has(id), `confirmed publish ${id} was never delivered`).toBe(true);

      // Per key, within one process: each delivery continues the previous one (seq + 1) or restarts at or
      // before it (a nack or expiry).
      for (const run of runs) {
        const last = new Map<string, number>();
        for (const l of run) {
          if (l.tag !== 'D') continue;
          const prev = last.get(l.key);
          if (prev !== undefined) expect(l.seq === prev + 1 || l.seq <= prev, `key ${l.key}: ${l.seq} after ${prev}`).toBe(true);
          last.set(l.key, l.seq);
        }
      }
      // Across restarts: a confirmed ack survives the kill (a key never resumes inside its acked prefix),
      // a key never jumps past what was never delivered, and no message of any key is skipped.
      const ackedBefore = new Map<string, Set<number>>();
      for (const run of runs) {
        const firstInRun = new Map<string, number>();
        for (const l of run) if (l.tag === 'D' && !firstInRun.has(l.key)) firstInRun.set(l.key, l.seq);
        for (const [key, first] of firstInRun) {
          const deliveredBefore = runs
            .slice(0, runs.indexOf(run))
            .flat()
            .filter((l) => l.tag === 'D' && l.key === key)
            .map((l) => l.seq);
          expect(first, `key ${key} resumed at ${first}`).toBeLessThanOrEqual(Math.max(0, ...deliveredBefore) + 1);
          const known = ackedBefore.get(key) ?? new Set<number>();
          let firstNotKnownAcked = 1;
          while (known.has(firstNotKnownAcked)) firstNotKnownAcked++;
          expect(first, `key ${key}: acked message ${first} delivered again after restart`).toBeGreaterThanOrEqual(firstNotKnownAcked);
        }
        for (const l of run) if (l.tag === 'A') ackedBefore.set(l.key, (ackedBefore.get(l.key) ?? new Set()).add(l.seq));
      }
      const seqsByKey = new Map<string, Set<number>>();
      for (const l of runs.flat()) if (l.tag === 'D') seqsByKey.set(l.key, (seqsByKey.get(l.key) ?? new Set()).add(l.seq));
      for (const [key, seqs] of seqsByKey) {
        const max = Math.max(...seqs);
        for (let s = 1; s <= max; s++) expect(seqs.has(s), `key ${key}: message ${s} never delivered`).toBe(true);
      }
    } finally {
      dir.remove();
    }
  }, 120_000);
});
