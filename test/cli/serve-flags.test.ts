import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { orderly } from '../helpers/cli.js';
import { tempDirPerTest } from '../helpers/temp-dir-per-test.js';

const dir = tempDirPerTest();

describe('orderly serve with a bad flag', () => {
  it.each([
    ['--port', 'abc', '--port: must be an integer from 0 to 65535, got abc'],
    ['--idle-timeout', '0', '--idle-timeout: must be 1 to 3600 seconds, got 0'],
  ])('%s %s is refused before the job file is read (and its modules loaded)', async (flag, value, problem) => {
    // A job file that is not there: read first, it would be the problem reported.
    const r = await orderly('serve', '--config', join(dir.path, 'absent.yaml'), flag, value);
    expect(r.code).toBe(2);
    // Before: "orderly: cannot read .../absent.yaml ...", the flag unchecked.
    expect(r.stderr.trim()).toBe(`orderly: ${problem}`);
  });
});
