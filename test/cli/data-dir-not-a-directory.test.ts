import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { orderly } from '../helpers/cli.js';
import { tempDirPerTest } from '../helpers/temp-dir-per-test.js';

const dir = tempDirPerTest();

describe('a dataDir that is a file', () => {
  it.each([
    ['the data directory itself', 'data'],
    ['a directory on its path', 'data/sub'],
  ])(
    '(%s) is a configuration error naming dataDir and the path, exit 2',
    async (_what, dataDir) => {
      writeFileSync(join(dir.path, 'data'), 'not a directory');
      const job = join(dir.path, 'job.yaml');
      writeFileSync(job, stringify({ dataDir, topics: [{ name: 'events' }], subscriptions: [{ name: 'sub', topic: 'events' }] }));
      for (const args of [['status'], ['publish', '--topic', 'events'], ['query', 'SELECT 1']]) {
        const [command, ...rest] = args as [string, ...string[]];
        const r = await orderly(command, job, ...rest);
        // Node's "ENOTDIR: not a directory, open '…/orderly.lock'", exit 1, had named neither the setting nor the cause.
        expect([r.code, r.stderr], command).toEqual([
          2,
          `orderly: dataDir: ${join(dir.path, dataDir)} is not a directory: a file is there, or on its path\n`,
        ]);
      }
    },
    60_000,
  );
});
