import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MAX_JOB_FILE_BYTES } from '../../src/job/job-config.js';
import { orderly } from '../helpers/cli.js';
import { tempDirPerTest } from '../helpers/temp-dir-per-test.js';

const dir = tempDirPerTest();

describe('a job file that is not a tree of settings', () => {
  it.each<[string, string, string, string[]]>([
    [
      'a self-referencing alias',
      'topics: &x [*x]\n',
      'topics[0]: a YAML alias that contains itself (a cycle); a job file must be a tree',
      ['validate', 'run', 'query'],
    ],
    ['an empty file', '', 'the file is empty', ['validate']],
    [
      'a file over the size cap',
      '#'.repeat(MAX_JOB_FILE_BYTES + 1),
      `the file is ${MAX_JOB_FILE_BYTES + 1} bytes; a job file may have at most`,
      ['validate'],
    ],
  ])(
    '%s: exits 2 naming the file and the problem, without a stack trace',
    async (_what, text, problem, commands) => {
      const file = join(dir.path, 'job.yaml');
      writeFileSync(file, text);
      for (const command of commands) {
        const r = await orderly(command, file, ...(command === 'query' ? ['SELECT 1'] : []));
        expect(r.code, `${command}: ${r.stderr}`).toBe(2);
        expect(r.stderr.startsWith(`orderly: ${file}: 1 problem\n  `)).toBe(true);
        expect(r.stderr.split('\n')[1]).toContain(problem);
        expect(r.stderr).not.toMatch(/Maximum call stack|\n\s+at /);
      }
    },
    120_000,
  );
});

describe('orderly validate lists every problem of a job file (issue #13)', () => {
  it("a typo'd key and an out-of-range maxDuration: both, in one run", async () => {
    const file = join(dir.path, 'job.yaml');
    writeFileSync(
      file,
      [
        'topics: [{ name: events }]',
        'subscriptions:',
        '  - name: files',
        '    topic: events',
        '    enableMessageOrderring: true',
        '    cloudStorageConfig: { bucket: exports, maxDuration: 30s }',
        '',
      ].join('\n'),
    );
    const r = await orderly('validate', file);
    expect(r.code).toBe(2);
    expect(r.stderr.split('\n').slice(0, 3)).toEqual([
      `orderly: ${file}: 2 problems`,
      '  subscriptions[0].enableMessageOrderring: unknown key (a typo? see docs/configuration.md)',
      '  subscriptions[0].cloudStorageConfig.maxDuration: must be between 60s and 600s, got 30s',
    ]);
  }, 60_000);
});

describe('orderly validate refuses what creating a subscription refuses', () => {
  it('exactly-once beside push or an export, and a filter Pub/Sub refuses: each named, with the rest of the file', async () => {
    const file = join(dir.path, 'job.yaml');
    writeFileSync(
      file,
      [
        'duckdb: { path: out.duckdb }',
        'topics: [{ name: events }]',
        'subscriptions:',
        '  - { name: pushed, topic: events, enableExactlyOnceDelivery: true, pushConfig: { pushEndpoint: "http://127.0.0.1:9/push" } }',
        '  - { name: table, topic: events, enableExactlyOnceDelivery: true, bigqueryConfig: { table: p.d.t }, ackDeadlineSeconds: 5 }',
        '  - { name: mixed, topic: events, filter: "attributes:a AND attributes:b OR attributes:c" }',
        '  - { name: pulled, topic: events, enableExactlyOnceDelivery: true }',
        '',
      ].join('\n'),
    );
    const r = await orderly('validate', file);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr.split('\n').slice(0, 5)).toEqual([
      `orderly: ${file}: 4 problems`,
      '  subscriptions[0].enableExactlyOnceDelivery: exactly-once delivery is supported on pull subscriptions only, not with pushConfig',
      '  subscriptions[1].ackDeadlineSeconds: must be an integer between 10 and 600, got 5',
      '  subscriptions[1].enableExactlyOnceDelivery: exactly-once delivery is supported on pull subscriptions only, not with bigqueryConfig',
      expect.stringMatching(/^ {2}subscriptions\[2\]\.filter: .*AND and OR cannot be combined/),
    ]);
  }, 60_000);
});
