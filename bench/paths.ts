import { existsSync, readFileSync } from 'node:fs';
import { dirname, extname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/**
 * Where the benchmarks find things, whether they run as TypeScript (`tsx bench/run.ts`) or compiled
 * (`npm run bench` runs them from dist/bench/, as users run the package: without a TypeScript loader,
 * whose own thread would count in every step's peak RSS).
 */
const here = fileURLToPath(import.meta.url);

function findRepo(dir: string): string {
  if (existsSync(join(dir, 'package.json')) && existsSync(join(dir, 'bin', 'orderly.js'))) return dir;
  const parent = dirname(dir);
  if (parent === dir) throw new Error(`no Orderly checkout above ${here}`);
  return findRepo(parent);
}

/** The repository's root (fixtures/, bin/). */
export const repoRoot = findRepo(dirname(here));

/** The `orderly` command a user runs. */
export const orderlyBin = join(repoRoot, 'bin', 'orderly.js');

/** bin/orderly.js starts as a shell script: `export NAME="${NAME-value}" ...; exec node <flags> "$0" "$@"`. */
const launch = /^":" \/\/; (?:export ([^;]*); )?exec node (.*) "\$0" "\$@"$/m.exec(readFileSync(orderlyBin, 'utf8'));
if (!launch) throw new Error(`${orderlyBin}: no line "exec node <flags> $0 $@" to take the V8 flags from`);
/** The variables that line exports (those the environment does not set already). */
const launchEnv = Object.fromEntries([...(launch[1] ?? '').matchAll(/(\w+)="\$\{\1-([^}]*)\}"/g)].map((m) => [m[1]!, m[2]!]));

/**
 * How `orderly` starts node (bin/orderly.js): the V8 flags it execs node with and the environment it sets
 * (bin/process-env.json). The measured processes start the same way, so each figure is what a user's
 * `orderly` would show.
 */
export const orderlyNode = {
  flags: launch[2]!.split(' '),
  env: { ...launchEnv, ...(JSON.parse(readFileSync(join(repoRoot, 'bin', 'process-env.json'), 'utf8')) as Record<string, string>) },
};

/** A bench module to run in a child process, in the same form (.ts or .js) as this one. */
export function benchModule(name: string): URL {
  return pathToFileURL(join(dirname(here), `${name}${extname(here)}`));
}

/**
 * The environment of a process that measures a baseline: this one's without what `orderly` sets for its own
 * sake (bin/process-env.json's DuckDB allocator setting, which returns freed pages at once for the drains'
 * memory and slowed DuckDB's own COPY ~4x): a baseline is measured at its best.
 */
export function baselineEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => name !== 'DUCKDB_JE_MALLOC_CONF'));
}
