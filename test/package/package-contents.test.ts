import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const repo = fileURLToPath(new URL('../..', import.meta.url));

/** What `npm pack` puts in the tarball (dist/ is built by the global setup). */
function packed(): string[] {
  const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: repo, encoding: 'utf8' });
  return (JSON.parse(out) as { files: { path: string }[] }[])[0]!.files.map((f) => f.path);
}

it('packs what runs and nothing else: no TypeScript sources, tests, or runtime data', () => {
  const files = packed();
  expect(files).toEqual(
    expect.arrayContaining(['bin/orderly.js', 'dist/src/index.js', 'dist/src/connector/index.d.ts', 'fixtures/demo/job.yaml']),
  );
  const junk = files.filter(
    (f) =>
      (f.endsWith('.ts') && !f.endsWith('.d.ts')) ||
      /(^|\/)(test|tests|__tests__)\//.test(f) ||
      /\.(sqlite|duckdb|wal|log|tgz)$/.test(f) ||
      /(^|\/)orderly\.(lock|sqlite\.id)$/.test(f),
  );
  expect(junk).toEqual([]);
});
