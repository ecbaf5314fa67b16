import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import { importGraph } from './import-graph.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const graph = importGraph(root, ['src', 'connectors']);

/** The modules `from` loads when it loads (static imports that are not type-only), itself included. */
function loadedWith(from: string): Set<string> {
  const seen = new Set([from]);
  const queue = [from];
  for (let file = queue.shift(); file; file = queue.shift())
    for (const e of graph.edges)
      if (e.from === file && !e.typeOnly && !e.dynamic && !seen.has(e.to)) {
        seen.add(e.to);
        queue.push(e.to);
      }
  return seen;
}
/** A value (not type-only) import of DuckDB's package, which loads its native binding. */
const loadsDuckDb = (file: string) => /^import\s+(?!type\s)[^;]*from\s+'@duckdb\/node-api'/m.test(readFileSync(join(root, file), 'utf8'));

it('a job without a DuckDB export, and the conformance suite, load no DuckDB (it is loaded on demand, so a connector that does not use it needs no native binding)', () => {
  for (const entry of ['src/testing/index.ts', 'src/job/job-runtime.ts', 'src/connector/index.ts'])
    expect([entry, [...loadedWith(entry)].filter(loadsDuckDb)]).toEqual([entry, []]);
});
