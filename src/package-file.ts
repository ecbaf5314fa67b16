import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * A file of the Orderly package (e.g. `fixtures/demo/job.yaml`), found from this module whether it runs from
 * source (`src/`) or from the build (`dist/src/`): the nearest folder upwards holding Orderly's package.json.
 */
export function packageFile(relative: string): string {
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json')) && existsSync(join(dir, relative))) return join(dir, relative);
    if (dirname(dir) === dir) throw new Error(`${relative} is not part of this Orderly installation`);
  }
}
