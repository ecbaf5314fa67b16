import { chmodSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openCore } from '../helpers/core.js';
import { orderlyAsUser as orderlyAs } from '../helpers/cli.js';
import { tempDirPerTest } from '../helpers/temp-dir-per-test.js';

/**
 * A store file its user may not write (chmod 0444, a file of another user): SQLite opened it read-only
 * without a word, `orderly run` logged "job running" and served, `orderly status` showed every
 * subscription ACTIVE, and every publish then failed with HTTP 500 INTERNAL ("attempt to write a readonly
 * database"). Now `run` and `status` refuse to start, naming the file, and leave it as it was.
 */
const dir = tempDirPerTest();
describe('a store file that cannot be written', () => {
  it('orderly run and orderly status refuse to start, naming the file, and leave it as it was', async () => {
    const { core } = await openCore(dir.path);
    await core.createTopic('orders');
    await core.close();
    const store = join(dir.path, 'orderly.sqlite');
    chmodSync(store, 0o444);
    chmodSync(dir.path, 0o777); // the lock file beside it can be made
    const job = join(dir.path, 'job.yaml');
    writeFileSync(job, `dataDir: ${dir.path}\ntopics:\n  - name: orders\n`);
    const before = { size: statSync(store).size, bytes: readFileSync(store) };

    for (const command of ['run', 'status']) {
      const result = await orderlyAs([command, job]);
      expect(result.code, `${command}: ${result.stdout}${result.stderr}`).toBe(1);
      expect(result.stderr).toContain(`the Orderly store at ${store} cannot be written`);
      expect(result.stderr).not.toMatch(/\n\s+at /); // no stack trace
    }
    expect(statSync(store).size).toBe(before.size);
    expect(readFileSync(store).equals(before.bytes)).toBe(true);
  }, 60_000);
});
