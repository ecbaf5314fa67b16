import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadJob } from '../../src/job/job-config.js';
import { JobRuntime } from '../../src/job/job-runtime.js';
import { createLogger } from '../../src/log.js';
import { tempDir } from '../helpers/core.js';

let dir: ReturnType<typeof tempDir>;
beforeEach(() => {
  dir = tempDir();
});
afterEach(() => dir.remove());

const base = () => ({
  projectId: 'test-project',
  dataDir: './data',
  duckdb: { path: './data/x.duckdb' },
  topics: [{ name: 'events' }, { name: 'dead' }],
  subscriptions: [
    { name: 'pull-sub', topic: 'events', enableMessageOrdering: true },
    { name: 'files', topic: 'events', cloudStorageConfig: { bucket: 'exports', maxDuration: '5m' } },
  ],
});
function write(job: unknown, name = 'job.yaml'): string {
  const file = join(dir.path, name);
  writeFileSync(file, name.endsWith('.json') ? JSON.stringify(job) : stringify(job));
  return file;
}
function problems(job: unknown, env: NodeJS.ProcessEnv = {}): string[] {
  try {
    loadJob(write(job), env);
  } catch (e) {
    return (e as { problems: string[] }).problems;
  }
  return [];
}

describe('job file validation', () => {
  it('accepts the demo job and a JSON job, resolving paths next to the file', () => {
    expect(loadJob('fixtures/demo/job.yaml').subscriptions).toHaveLength(2);
    const job = loadJob(write(base(), 'job.json'));
    expect(job.dataDir).toBe(join(dir.path, 'data'));
    expect(job.duckdb?.path).toBe(join(dir.path, 'data/x.duckdb'));
  });

  it.each<[string, (j: ReturnType<typeof base>) => unknown, string]>([
    ['a typo at the top', (j) => ({ ...j, topcis: [] }), 'topcis: unknown key (a typo? see docs/configuration.md)'],
    ['a typo in a subscription', (j) => ({ ...j, subscriptions: [{ ...j.subscriptions[0], enableMessageOrderring: true }] }), 'subscriptions[0].enableMessageOrderring: unknown key (a typo? see docs/configuration.md)'],
    ['maxDuration out of range', (j) => ({ ...j, subscriptions: [j.subscriptions[0], { ...j.subscriptions[1], cloudStorageConfig: { bucket: 'exports', maxDuration: '30s' } }] }), 'subscriptions[1].cloudStorageConfig.maxDuration: must be between 60s and 600s, got 30s'],
    ['ackDeadlineSeconds out of range', (j) => ({ ...j, subscriptions: [{ ...j.subscriptions[0], ackDeadlineSeconds: 5 }] }), 'subscriptions[0].ackDeadlineSeconds: must be an integer between 10 and 600, got 5'],
    ['an unknown topic', (j) => ({ ...j, subscriptions: [{ ...j.subscriptions[0], topic: 'nope' }] }), 'subscriptions[0].topic: no topic "nope" in topics'],
    ['a bad duration', (j) => ({ ...j, subscriptions: [{ ...j.subscriptions[0], messageRetentionDuration: 'a week' }] }), 'subscriptions[0].messageRetentionDuration: a duration like "300s" or "5m"'],
    ['a bad filter', (j) => ({ ...j, subscriptions: [{ ...j.subscriptions[0], filter: 'attributes.x = 1' }] }), 'subscriptions[0].filter: expected a quoted string at position 15 in "attributes.x = 1"'],
    ['a bigquery table without the job\'s duckdb', (j) => ({ ...j, duckdb: undefined, subscriptions: [{ name: 'tbl', topic: 'events', bigqueryConfig: { table: 'p.d.t' } }] }), 'subscriptions[0].bigqueryConfig: needs the job\'s duckdb.path'],
    ['a bad bigquery table name', (j) => ({ ...j, subscriptions: [{ name: 'tbl', topic: 'events', bigqueryConfig: { table: 'd.t' } }] }), 'subscriptions[0].bigqueryConfig.table: must be "project.dataset.table", got "d.t"'],
    ['an invalid subscription id', (j) => ({ ...j, subscriptions: [{ ...j.subscriptions[0], name: '1bad' }] }), 'subscriptions[0].name: invalid id "1bad"'],
    ['a wrong type', (j) => ({ ...j, subscriptions: [{ ...j.subscriptions[0], retainAckedMessages: 'yes' }] }), 'subscriptions[0].retainAckedMessages: Invalid input: expected boolean, received string'],
  ])('names the path for %s', (_what, change, message) => {
    const found = problems(change(base()));
    expect(found.some((p) => p.startsWith(message)), `got ${JSON.stringify(found)}`).toBe(true);
  });

  it('reports every problem at once', () => {
    const job = base();
    const found = problems({ ...job, colour: 'red', subscriptions: [{ ...job.subscriptions[0], ackDeadlineSeconds: 5 }, { ...job.subscriptions[1], topic: 'nope' }] });
    expect(found).toEqual(['colour: unknown key (a typo? see docs/configuration.md)']);
    const semantic = problems({ ...job, subscriptions: [{ ...job.subscriptions[0], ackDeadlineSeconds: 5 }, { ...job.subscriptions[1], topic: 'nope' }] });
    expect(semantic).toHaveLength(2);
  });

  it('substitutes ${ENV} references and names the missing ones', () => {
    const job = { ...base(), objectStorage: { endpoint: '${S3_URL}', accessKeyId: '${KEY_ID}' } };
    expect(problems(job, { S3_URL: 'http://127.0.0.1:9000' })).toEqual(['objectStorage.accessKeyId: environment variable KEY_ID is not set']);
    expect(loadJob(write(job), { S3_URL: 'http://x:1', KEY_ID: 'k' }).objectStorage?.endpoint).toBe('http://x:1');
  });
});

describe('applying a changed job file to an existing data directory', () => {
  it('creates what is new, updates mutable fields, refuses immutable changes, deletes nothing', async () => {
    const logger = createLogger();
    const job = base();
    let runtime = await JobRuntime.start(loadJob(write(job)), logger, { withExports: false });
    expect(runtime.reconciled.created).toHaveLength(4);
    await runtime.stop();

    const changed = { ...job, topics: [...job.topics, { name: 'more' }], subscriptions: [{ ...job.subscriptions[0], ackDeadlineSeconds: 30 }] };
    runtime = await JobRuntime.start(loadJob(write(changed)), logger, { withExports: false });
    expect(runtime.reconciled).toEqual({
      created: ['projects/test-project/topics/more'],
      updated: ['projects/test-project/subscriptions/pull-sub'],
      unchanged: ['projects/test-project/topics/events', 'projects/test-project/topics/dead'],
    });
    expect(runtime.core.getSubscription('pull-sub').ackDeadlineSeconds).toBe(30);
    expect(runtime.core.hasSubscription('files')).toBe(true); // dropped from the file, not deleted
    await runtime.stop();

    const immutable = { ...job, subscriptions: [{ ...job.subscriptions[0], enableMessageOrdering: false }] };
    await expect(JobRuntime.start(loadJob(write(immutable)), logger, { withExports: false })).rejects.toThrow(
      'subscriptions[0] (pull-sub): enableMessageOrdering cannot be changed after creation (is true); create a new subscription instead',
    );
  });
});
