#!/bin/sh
":" //; export MALLOC_ARENA_MAX="${MALLOC_ARENA_MAX-2}"; exec node --max-semi-space-size=4 "$0" "$@"
// The CLI runs the build in dist/ (`npm run build`; `npm ci` and `npm install` run it through `prepare`).
//
// How the process is set up (docs/configuration.md#memory; bench/ starts its measured processes the same way):
// - `--max-semi-space-size=4` (V8's young generation, 16 MiB by default): an export allocates ~100 MB/s
//   of messages that die soon after, and a young generation that large held ~30 MiB more at every
//   drain's peak, for 3–10% more speed. V8 reads it only at start, so the file starts as a shell script
//   that execs node with it (the same process: signals and kill -9 reach node itself); to node the second
//   line is a string and a comment. `env -S` on the #! line would do the same but BusyBox's env (Alpine)
//   has no -S. `node bin/orderly.js` runs the same, with V8's default.
// - glibc's malloc keeps at most 2 arenas, unless the environment says otherwise (read when the process
//   starts, so here too): glibc makes up to 8 per core, one for each thread that allocates (Node's, the
//   store's writer, libuv's pool), each holding its own freed memory: ~25 MiB less at a DuckDB table
//   export drain's peak (measured beside other load). musl (Alpine) ignores it.
// - process-env.json, unless the environment sets them already:
//   - DUCKDB_JE_MALLOC_CONF: DuckDB's own allocator (jemalloc, inside its binding) returns freed pages to
//     the system at once instead of keeping them for a second: 30 MiB less at a Parquet export's peak
//     and 80 MiB at a DuckDB table export's, 10–20% slower appends. Read when DuckDB first loads, which
//     is after this.
//   - the AWS SDK warns at every start that its 2027 releases will need Node 22; Orderly pins a release
//     that runs on Node 20, so the notice is noise here (the SDK's own switch turns it off).
import { readFileSync } from 'node:fs';

for (const [name, value] of Object.entries(JSON.parse(readFileSync(new URL('process-env.json', import.meta.url), 'utf8')))) {
  process.env[name] ??= value;
}

let cli;
try {
  cli = await import('../dist/src/cli/main.js');
} catch (e) {
  if (e?.code !== 'ERR_MODULE_NOT_FOUND' || !String(e.message).includes('dist/src/cli/main.js')) throw e;
  console.error('orderly: the build is missing (dist/); run `npm run build` in the orderly folder');
  process.exit(1);
}
process.exitCode = await cli.main(process.argv);
