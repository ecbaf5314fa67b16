import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const repo = fileURLToPath(new URL('../..', import.meta.url));

/** What `npm pack` puts in the tarball (dist/ is built by the global setup). */
function packed(): string[] {
  const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: repo, encoding: 'utf8' });
  return (JSON.parse(out) as { files: { path: string }[] }[])[0]!.files.map((f) => f.path);
}

it('packs what runs and nothing else: no TypeScript sources, tests, or runtime data (but the example connector docs point to)', () => {
  const files = packed();
  expect(files).toEqual(
    expect.arrayContaining(['bin/orderly.js', 'dist/src/index.js', 'dist/src/connector/index.d.ts', 'fixtures/demo/job.yaml']),
  );
  const junk = files.filter(
    (f) =>
      (!f.startsWith('examples/') && ((f.endsWith('.ts') && !f.endsWith('.d.ts')) || /(^|\/)(test|tests|__tests__)\//.test(f))) ||
      /\.(sqlite|duckdb|wal|log|tgz)$/.test(f) ||
      /(^|\/)orderly\.(lock|sqlite\.id)$/.test(f) ||
      /(^|\/)(node_modules|dist)\//.test(f.replace(/^dist\//, '')),
  );
  expect(junk).toEqual([]);
});

it('every relative link of the packed docs reaches a packed file (connectors.md\'s "complete example" included)', () => {
  const files = packed();
  const folders = new Set(
    files.flatMap((f) =>
      f
        .split('/')
        .slice(0, -1)
        .map((_, i, parts) => parts.slice(0, i + 1).join('/')),
    ),
  );
  const broken = files
    .filter((f) => f.endsWith('.md'))
    .flatMap((doc) =>
      [...readFileSync(join(repo, doc), 'utf8').matchAll(/\]\(([^)#:\s]+)(#[^)]*)?\)/g)].map((m) => ({
        doc,
        target: normalize(join(dirname(doc), m[1]!)).replace(/\/$/, ''),
      })),
    )
    .filter(({ target }) => !files.includes(target) && !folders.has(target));
  expect(broken).toEqual([]);
});
