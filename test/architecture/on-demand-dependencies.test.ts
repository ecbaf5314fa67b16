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
/** Whether the file imports (a value, not only types) one of `packages`. */
const imports = (file: string, packages: string[]) =>
  packages.some((name) => new RegExp(`^import\\s+(?!type\\s)[^;]*from\\s+'${name}'`, 'm').test(readFileSync(join(root, file), 'utf8')));

it('a job without a DuckDB export, and the conformance suite, load no DuckDB (it is loaded on demand, so a connector that does not use it needs no native binding)', () => {
  for (const entry of ['src/testing/index.ts', 'src/job/job-runtime.ts', 'src/connector/index.ts'])
    expect([entry, [...loadedWith(entry)].filter((file) => imports(file, ['@duckdb/node-api']))]).toEqual([entry, []]);
});

it("the CLI, a job, its queries and audits load no Google Pub/Sub client unless the job has remote exports (the export manager loads it then): it is half a second of every command's start-up", () => {
  const client = ['@google-cloud/pubsub', 'google-gax', 'google-auth-library'];
  for (const entry of ['src/cli/main.ts', 'src/job/job-runtime.ts', 'src/job/query.ts', 'src/job/export-audit.ts'])
    expect([entry, [...loadedWith(entry)].filter((file) => imports(file, client))]).toEqual([entry, []]);
});

it("a job that serves nothing (query, status, audit, an offline publish) loads no gRPC server, Pub/Sub protos or prom-client: they are loaded when run or serve starts the endpoint and the metrics (~0.3 s of every other command's start)", () => {
  const serving = ['@grpc/grpc-js', '@grpc/proto-loader', 'prom-client'];
  for (const entry of ['src/job/job-runtime.ts', 'src/job/query.ts', 'src/job/export-audit.ts'])
    expect([entry, [...loadedWith(entry)].filter((file) => imports(file, serving))]).toEqual([entry, []]);
});
