import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { cycles, importGraph } from './import-graph.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const graph = importGraph(root, ['src', 'connectors', 'examples', 'test', 'bench', 'fixtures']);
const importsOf = (from: RegExp) => graph.edges.filter((e) => from.test(e.from));
const show = (edges: { from: string; to: string }[]) => edges.map((e) => `${e.from} -> ${e.to}`);

describe('the layers (import graph of src, connectors, examples, test, bench)', () => {
  it('has no import cycle (type-only imports included)', () => {
    expect(cycles(graph.edges).map((c) => c.join(' <-> '))).toEqual([]);
  });

  it('src/api imports nothing from src/connector or connectors/: the API knows nothing of exports', () => {
    expect(show(importsOf(/^src\/api\//).filter((e) => /^(src\/connector|connectors)\//.test(e.to)))).toEqual([]);
  });

  it("src/cli and src/job import no connector: only connectors/index.ts (the built-ins' registration), the rest through the registry", () => {
    expect(show(importsOf(/^src\/(cli|job)\//).filter((e) => e.to.startsWith('connectors/') && e.to !== 'connectors/index.ts'))).toEqual(
      [],
    );
  });

  it('src/core imports nothing outside src/core, src/store and src/schema', () => {
    expect(show(importsOf(/^src\/core\//).filter((e) => !/^src\/(core|store|schema)\//.test(e.to)))).toEqual([]);
  });

  it("nothing outside src/core reaches a subscription's runtime (core.runtime(...))", () => {
    expect(graph.calls('runtime').filter((c) => !c.file.startsWith('src/core/'))).toEqual([]);
  });

  it('connectors import no other connector, and the framework (src/) imports none but through connectors/index.ts', () => {
    const connectorOf = (path: string) => /^connectors\/([^/]+)\//.exec(path)?.[1];
    expect(
      show(importsOf(/^connectors\/[^/]+\//).filter((e) => connectorOf(e.to) !== undefined && connectorOf(e.to) !== connectorOf(e.from))),
    ).toEqual([]);
    expect(show(importsOf(/^src\//).filter((e) => connectorOf(e.to) !== undefined))).toEqual([]);
  });
});
