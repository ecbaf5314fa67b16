import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const bin = fileURLToPath(new URL('../../bin/orderly.js', import.meta.url));

describe('orderly CLI', () => {
  it('--help lists the commands', () => {
    const out = execFileSync(process.execPath, [bin, '--help'], { encoding: 'utf8' });
    expect(out).toContain('Usage: orderly');
    expect(out).toContain('demo');
  });

  it('demo (the README quick start) consumes every order change in per-key order', () => {
    const out = execFileSync(process.execPath, [bin, 'demo'], { encoding: 'utf8', timeout: 60_000 });
    expect(out).toMatch(/Published 4173 order changes over 1200 ordering keys/);
    expect(out).toMatch(/Nacked [1-9]\d* changes; [1-9]\d* deliveries were redeliveries/);
    expect(out).toContain('gaps or reversals seen by the handler: 0. Backlog left: 0.');
  });
});
