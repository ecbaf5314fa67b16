import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** The plugin modules imported so far, by file URL. */
const imported = new Set<string>();

/**
 * Imports the job file's `plugins:` (modules whose import registers connectors), each once per process.
 * A path (`./my-connector.js`, absolute) is relative to the job file's folder (`base`); a package name is
 * looked up in `node_modules` from there upwards, then from Orderly's own folder upwards (so a plugin
 * installed beside a global Orderly is found), taking the package's `import` export (or `main`).
 * Returns a problem per plugin that cannot be loaded.
 */
export async function importPlugins(specs: string[], base: string): Promise<string[]> {
  const problems: string[] = [];
  for (const [index, spec] of specs.entries()) {
    let url: string;
    try {
      url = resolvePlugin(spec, base);
    } catch (e) {
      problems.push(`plugins[${index}]: ${(e as Error).message}`);
      continue;
    }
    if (imported.has(url)) continue;
    try {
      await import(url);
      imported.add(url);
    } catch (e) {
      const message =
        (e as NodeJS.ErrnoException).code === 'ERR_UNKNOWN_FILE_EXTENSION'
          ? 'a TypeScript plugin needs a loader: build it to JavaScript (or run node --import tsx)'
          : (e as Error).message;
      problems.push(`plugins[${index}]: cannot load "${spec}": ${message}`);
    }
  }
  return problems;
}

/** The plugins of `specs` (a job file's list; entries that are not strings are left to its schema) that are not imported yet. */
export function unloadedPlugins(specs: unknown[], base: string): { index: number; problem: string }[] {
  return specs.flatMap((spec, index) => {
    if (typeof spec !== 'string' || !spec) return [];
    try {
      if (imported.has(resolvePlugin(spec, base))) return [];
      return [{ index, problem: `"${spec}" is not loaded (load the job with loadJobWithPlugins, as the orderly command does)` }];
    } catch (e) {
      return [{ index, problem: (e as Error).message }];
    }
  });
}

/** The plugin's file URL; an Error saying where it was looked for if it is not found. */
export function resolvePlugin(spec: string, base: string): string {
  if (spec.startsWith('file:')) return spec;
  if (spec.startsWith('.') || isAbsolute(spec)) {
    const path = resolve(base, spec);
    if (!existsSync(path) || !statSync(path).isFile())
      throw new Error(`no file ${path} (a plugin path is relative to the job file's folder)`);
    return pathToFileURL(path).href;
  }
  const own = dirname(fileURLToPath(import.meta.url));
  const found = findPackageEntry(spec, base) ?? findPackageEntry(spec, own);
  if (!found)
    throw new Error(`no package "${spec}" in node_modules from ${base} or from Orderly's own folder upwards (install it, or give a path)`);
  return pathToFileURL(found).href;
}

/** The module `import(spec)` would load from a file in `from`: node_modules upwards, the `import` export or `main`. */
function findPackageEntry(spec: string, from: string): string | undefined {
  const parts = spec.split('/');
  const name = spec.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!;
  const subpath = spec === name ? '.' : `./${spec.slice(name.length + 1)}`;
  let scope = true;
  for (let dir = from; ; dir = dirname(dir)) {
    // Node's self-reference: inside a package with exports, its own name resolves to it (the package
    // scope is the nearest package.json only).
    const own = join(dir, 'package.json');
    if (scope && existsSync(own)) {
      scope = false;
      const pkg = JSON.parse(readFileSync(own, 'utf8')) as { name?: unknown; exports?: unknown };
      if (pkg.name === name && pkg.exports !== undefined) {
        const target = exportTarget(pkg.exports, subpath);
        if (!target) throw new Error(`package "${name}" exports no "${subpath}" for import`);
        return join(dir, target);
      }
    }
    const root = join(dir, 'node_modules', name);
    const manifest = join(root, 'package.json');
    if (existsSync(manifest)) {
      const pkg = JSON.parse(readFileSync(manifest, 'utf8')) as { exports?: unknown; main?: string };
      const target =
        pkg.exports === undefined ? (subpath === '.' ? (pkg.main ?? 'index.js') : subpath) : exportTarget(pkg.exports, subpath);
      if (!target) throw new Error(`package "${name}" exports no "${subpath}" for import`);
      return join(root, target);
    }
    if (dirname(dir) === dir) return undefined;
  }
}

/** The target of `subpath` in a package's `exports`, taking the `import`, `node` or `default` condition. */
function exportTarget(exports: unknown, subpath: string): string | undefined {
  const bySubpath =
    exports && typeof exports === 'object' && !Array.isArray(exports) && Object.keys(exports).some((k) => k.startsWith('.'));
  const entry = bySubpath ? (exports as Record<string, unknown>)[subpath] : subpath === '.' ? exports : undefined;
  return condition(entry);
}

function condition(entry: unknown): string | undefined {
  if (typeof entry === 'string') return entry;
  if (Array.isArray(entry)) return entry.map(condition).find((t) => t !== undefined);
  if (entry && typeof entry === 'object') {
    for (const [key, value] of Object.entries(entry)) {
      if (key === 'import' || key === 'node' || key === 'default') {
        const target = condition(value);
        if (target) return target;
      }
    }
  }
  return undefined;
}
