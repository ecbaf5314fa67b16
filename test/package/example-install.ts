import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';

interface LockEntry {
  version?: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  dev?: boolean;
  devOptional?: boolean;
  [field: string]: unknown;
}

/**
 * A package-lock.json for a project (`dir`) that depends on Orderly's packed tarball, pinning every other
 * package to the version Orderly's own lock file has. With it `npm ci` installs from the npm cache exactly
 * what this repository tests against; without it npm resolves the newest versions, whose metadata the
 * cache may not have.
 */
export function writeLockForTarball(repo: string, dir: string, tarball: string): void {
  const packages = (JSON.parse(readFileSync(join(repo, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> }).packages;
  const orderly = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as {
    version: string;
    license: string;
    dependencies: Record<string, string>;
    bin: unknown;
    engines: unknown;
  };
  const project = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
    name: string;
    version: string;
    dependencies?: Record<string, string>;
    devDependencies?: Record<string, string>;
  };
  const locked: Record<string, LockEntry> = {};
  // Node's lookup: node_modules of the package itself, then of each folder above it.
  const visit = (path: string) => {
    if (locked[path]) return;
    const { dev: _dev, devOptional: _devOptional, ...entry } = packages[path]!;
    locked[path] = entry;
    for (const [name, optional] of [
      ...Object.keys(entry.dependencies ?? {}).map((n) => [n, false] as const),
      ...Object.keys(entry.optionalDependencies ?? {}).map((n) => [n, true] as const),
    ]) {
      let from = path;
      for (;;) {
        const candidate = `${from ? `${from}/` : ''}node_modules/${name}`;
        if (packages[candidate]) {
          visit(candidate);
          break;
        }
        if (!from) {
          if (!optional) throw new Error(`the lock file has no ${name} (needed by ${path})`);
          break;
        }
        const above = from.lastIndexOf('/node_modules/');
        from = above < 0 ? '' : from.slice(0, above);
      }
    }
  };
  for (const name of [...Object.keys(orderly.dependencies), ...Object.keys(project.devDependencies ?? {})]) visit(`node_modules/${name}`);
  locked['node_modules/orderly'] = {
    version: orderly.version,
    resolved: `file:../${basename(tarball)}`,
    integrity: `sha512-${createHash('sha512').update(readFileSync(tarball)).digest('base64')}`,
    license: orderly.license,
    dependencies: orderly.dependencies,
    bin: orderly.bin,
    engines: orderly.engines,
  };
  const root = {
    name: project.name,
    version: project.version,
    dependencies: project.dependencies,
    devDependencies: project.devDependencies,
  };
  writeFileSync(
    join(dir, 'package-lock.json'),
    JSON.stringify(
      { name: project.name, version: project.version, lockfileVersion: 3, requires: true, packages: { '': root, ...locked } },
      null,
      2,
    ),
  );
}
