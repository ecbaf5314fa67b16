import { afterEach, beforeEach } from 'vitest';
import { tempDir } from './temp-dir.js';

/** A fresh temp dir for each test of the file, removed after it: read `path` inside a test or hook. */
export function tempDirPerTest(prefix?: string): { readonly path: string } {
  let dir: ReturnType<typeof tempDir> | undefined;
  beforeEach(() => {
    dir = tempDir(prefix);
  });
  afterEach(() => dir?.remove());
  return {
    get path() {
      if (!dir) throw new Error('tempDirPerTest: read path inside a test or hook');
      return dir.path;
    },
  };
}
