import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync, utimesSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

/**
 * vitest's global setup: tests that spawn `bin/orderly.js` run the build in dist/, so it is brought up to
 * date first (an incremental `npm run build`), unless no source file changed since the last build.
 */
export default function buildDist(): void {
  const built = join(root, 'dist', '.tsbuildinfo');
  if (existsSync(built) && newest(['src', 'connectors', 'tsconfig.json', 'tsconfig.build.json', 'package.json']) < statSync(built).mtimeMs)
    return;
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  execFileSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' });
  // tsc leaves its build info alone when no output changed (a file saved unchanged): mark the build current.
  const now = new Date();
  utimesSync(built, now, now);
}

/** The newest modification time among `paths` (files, or folders walked). */
function newest(paths: string[]): number {
  let latest = 0;
  const visit = (path: string) => {
    const stat = statSync(path);
    if (stat.isDirectory()) for (const name of readdirSync(path)) visit(join(path, name));
    else latest = Math.max(latest, stat.mtimeMs);
  };
  for (const p of paths) visit(join(root, p));
  return latest;
}
