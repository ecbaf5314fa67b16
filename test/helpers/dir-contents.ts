import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** Every path under `dir`, relative to it, sorted. */
export function tree(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' }).sort();
}

/** Every file under `dir` with its modification time and a hash of its content: what a command changed shows. */
export function files(dir: string): Record<string, string> {
  return Object.fromEntries(
    tree(dir).flatMap((path) => {
      const stat = statSync(join(dir, path));
      if (!stat.isFile()) return [];
      return [
        [
          path,
          `${stat.mtimeMs} ${createHash('sha256')
            .update(readFileSync(join(dir, path)))
            .digest('hex')}`,
        ],
      ];
    }),
  );
}
