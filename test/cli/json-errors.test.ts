import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { orderly } from '../helpers/cli.js';
import { tempDirPerTest } from '../helpers/temp-dir-per-test.js';

const dir = tempDirPerTest();

describe('--json failures', () => {
  it('are answered on stdout as { error: { code, message } } by every command, with the exit code the text had', async () => {
    const job = join(dir.path, 'job.yaml');
    writeFileSync(job, stringify({ dataDir: './data', topics: [{ name: 'events' }], subscriptions: [{ name: 'sub', topic: 'events' }] }));
    const invalid = join(dir.path, 'invalid.yaml');
    writeFileSync(invalid, 'topics: 3\n');
    const lines = join(dir.path, 'lines.jsonl');
    writeFileSync(lines, '{"a":1}\n');
    const cases: [string[], number, string, string][] = [
      [['status', invalid], 2, 'INVALID_ARGUMENT', 'topics: Invalid input'],
      [['publish', job, '--topic', 'missing', '--file', lines], 2, 'NOT_FOUND', 'missing'],
      [['publish', job], 2, 'INVALID_ARGUMENT', "required option '--topic <topic>'"],
      [['query', job, 'SELEC 1'], 1, 'UNKNOWN', 'syntax error'],
      [['audit', invalid, 'sub'], 2, 'INVALID_ARGUMENT', 'topics: Invalid input'],
      [['audit', job, 'missing'], 2, 'NOT_FOUND', 'missing'],
    ];
    for (const [args, code, errorCode, message] of cases) {
      const r = await orderly(...args, '--json');
      // Text on stderr only, and nothing on stdout, had been the answer a script got.
      const answer = JSON.parse(r.stdout) as { error: { code: string; message: string; problems?: string[] } };
      expect([r.code, answer.error.code], args.join(' ')).toEqual([code, errorCode]);
      expect(answer.error.message).toContain(message);
      expect(r.stderr).toContain(message);
    }
    const { error } = JSON.parse((await orderly('status', invalid, '--json')).stdout) as { error: { problems: string[] } };
    expect(error.problems).toEqual(['topics: Invalid input: expected array, received number']);
  }, 120_000);
});
