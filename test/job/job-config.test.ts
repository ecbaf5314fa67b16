import Database from 'better-sqlite3';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { JobConfigError, loadJob, MAX_JOB_FILE_BYTES } from '../../src/job/job-config.js';
import { JobRuntime } from '../../src/job/job-runtime.js';
import { createLogger } from '../../src/log.js';
import { tempDirPerTest } from '../helpers/temp-dir-per-test.js';

const dir = tempDirPerTest();

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
    expect(job.sections.duckdb).toEqual({ path: join(dir.path, 'data/x.duckdb'), init: [] });
  });

  it.each<[string, (j: ReturnType<typeof base>) => unknown, string]>([
    ['a typo at the top', (j) => ({ ...j, topcis: [] }), 'topcis: unknown key (a typo? see docs/configuration.md)'],
    [
      'a typo in a subscription',
      (j) => ({ ...j, subscriptions: [{ ...j.subscriptions[0], enableMessageOrderring: true }] }),
      'subscriptions[0].enableMessageOrderring: unknown key (a typo? see docs/configuration.md)',
    ],
    [
      'maxDuration out of range',
      (j) => ({
        ...j,
        subscriptions: [j.subscriptions[0], { ...j.subscriptions[1], cloudStorageConfig: { bucket: 'exports', maxDuration: '30s' } }],
      }),
      'subscriptions[1].cloudStorageConfig.maxDuration: must be between 60s and 600s, got 30s',
    ],
    [
      'ackDeadlineSeconds out of range',
      (j) => ({ ...j, subscriptions: [{ ...j.subscriptions[0], ackDeadlineSeconds: 5 }] }),
      'subscriptions[0].ackDeadlineSeconds: must be an integer between 10 and 600, got 5',
    ],
    [
      'an unknown topic',
      (j) => ({ ...j, subscriptions: [{ ...j.subscriptions[0], topic: 'nope' }] }),
      'subscriptions[0].topic: no topic "nope" in topics',
    ],
    [
      'a topic listed twice (a bare id and its full name)',
      (j) => ({ ...j, topics: [...j.topics, { name: 'projects/test-project/topics/events' }] }),
      'topics[2].name: "projects/test-project/topics/events" is also topics[0]\'s: each is listed once',
    ],
    [
      'a subscription listed twice (it would start as a mix of both)',
      (j) => ({ ...j, subscriptions: [...j.subscriptions, { name: 'pull-sub', topic: 'dead', ackDeadlineSeconds: 20 }] }),
      `subscriptions[${base().subscriptions.length}].name: "pull-sub" is also subscriptions[0]'s: each is listed once`,
    ],
    [
      'a bad duration',
      (j) => ({ ...j, subscriptions: [{ ...j.subscriptions[0], messageRetentionDuration: 'a week' }] }),
      'subscriptions[0].messageRetentionDuration: a duration like "300s" or "5m"',
    ],
    [
      'a bad filter',
      (j) => ({ ...j, subscriptions: [{ ...j.subscriptions[0], filter: 'attributes.x = 1' }] }),
      'subscriptions[0].filter: expected a quoted string at position 15 in "attributes.x = 1"',
    ],
    [
      "a bigquery table without the job's duckdb",
      (j) => ({ ...j, duckdb: undefined, subscriptions: [{ name: 'tbl', topic: 'events', bigqueryConfig: { table: 'p.d.t' } }] }),
      "subscriptions[0].bigqueryConfig: needs the job's duckdb.path",
    ],
    [
      'a bad bigquery table name',
      (j) => ({ ...j, subscriptions: [{ name: 'tbl', topic: 'events', bigqueryConfig: { table: 'd.t' } }] }),
      'subscriptions[0].bigqueryConfig.table: must be "project.dataset.table", got "d.t"',
    ],
    [
      'an invalid subscription id',
      (j) => ({ ...j, subscriptions: [{ ...j.subscriptions[0], name: '1bad' }] }),
      'subscriptions[0].name: invalid id "1bad"',
    ],
    [
      'a wrong type',
      (j) => ({ ...j, subscriptions: [{ ...j.subscriptions[0], retainAckedMessages: 'yes' }] }),
      'subscriptions[0].retainAckedMessages: Invalid input: expected boolean, received string',
    ],
  ])('names the path for %s', (_what, change, message) => {
    const found = problems(change(base()));
    expect(
      found.some((p) => p.startsWith(message)),
      `got ${JSON.stringify(found)}`,
    ).toBe(true);
  });

  it("finds a topic by its id or its full name in the job's project, whichever the topics list and the reference use", () => {
    const job = {
      projectId: 'proj-7',
      dataDir: './data',
      topics: ['events', 'dead-topic', 'projects/proj-7/topics/audit', 'projects/other/topics/events'].map((name) => ({ name })),
      subscriptions: [
        { name: 'by-full-name', topic: 'projects/proj-7/topics/events' },
        { name: 'by-id', topic: 'audit', deadLetterPolicy: { deadLetterTopic: 'projects/proj-7/topics/dead-topic' } },
        { name: 'other-project', topic: 'projects/other/topics/events', deadLetterPolicy: { deadLetterTopic: 'dead-topic' } },
      ],
    };
    expect(problems(job)).toEqual([]);
    // Another project's topic of the same id is another topic.
    expect(problems({ ...job, subscriptions: [{ name: 'elsewhere', topic: 'projects/other/topics/audit' }] })).toEqual([
      'subscriptions[0].topic: no topic "projects/other/topics/audit" in topics',
    ]);
  });

  it('reports a topic entry with a problem once: its subscriptions still find it by name', () => {
    const j = base();
    expect(problems({ ...j, topics: [{ name: 'events', labels: { team: 1 } }, j.topics[1]] })).toEqual([
      'topics[0].labels.team: Invalid input: expected string, received number',
    ]);
  });

  it('reports every problem at once: unknown keys hide no range errors, bad ids hide neither (issue #13)', () => {
    const job = base();
    const found = problems({
      ...job,
      colour: 'red',
      subscriptions: [
        { ...job.subscriptions[0], ackDeadlineSeconds: 5 },
        { ...job.subscriptions[1], topic: 'nope' },
      ],
    });
    expect(found).toEqual([
      'colour: unknown key (a typo? see docs/configuration.md)',
      'subscriptions[0].ackDeadlineSeconds: must be an integer between 10 and 600, got 5',
      'subscriptions[1].topic: no topic "nope" in topics',
    ]);
    // A typo'd key in a subscription, a bad id and an out-of-range maxDuration in the same subscription.
    const files = {
      ...job.subscriptions[1],
      name: '1bad',
      enableMessageOrderring: true,
      cloudStorageConfig: { bucket: 'exports', maxDuration: '30s', maxDurtion: '5m', avroConfig: { writeMetdata: true } },
    };
    expect(problems({ ...job, subscriptions: [job.subscriptions[0], files] })).toEqual([
      'subscriptions[1].enableMessageOrderring: unknown key (a typo? see docs/configuration.md)',
      expect.stringMatching(/^subscriptions\[1\]\.name: invalid id "1bad"/),
      expect.stringMatching(/^subscriptions\[1\]\.cloudStorageConfig\.maxDurtion: unknown field \(known: /),
      'subscriptions[1].cloudStorageConfig.avroConfig.writeMetdata: unknown field (known: writeMetadata, useTopicSchema)',
      'subscriptions[1].cloudStorageConfig.maxDuration: must be between 60s and 600s, got 30s',
    ]);
    // Wrong types elsewhere do not stop the checks of the parts that are right.
    expect(problems({ ...job, metrics: { port: 'x' }, subscriptions: [{ ...job.subscriptions[0], ackDeadlineSeconds: 5 }] })).toEqual([
      'metrics.port: Invalid input: expected number, received string',
      'subscriptions[0].ackDeadlineSeconds: must be an integer between 10 and 600, got 5',
    ]);
  });

  it('quotes a bad projectId, as every other setting its bad value', () => {
    // Before: 'projectId: a Pub/Sub project id (6-30 lowercase letters, digits, "-")', the value nowhere.
    expect(problems({ ...base(), projectId: 'My_Project' })).toEqual([
      'projectId: must be a Pub/Sub project id (6-30 lowercase letters, digits and "-", starting with a letter, not ending with "-"), got "My_Project"',
    ]);
  });

  it('substitutes ${ENV} references and names the missing ones', () => {
    const job = { ...base(), objectStorage: { endpoint: '${S3_URL}', accessKeyId: '${KEY_ID}' } };
    expect(problems(job, { S3_URL: 'http://127.0.0.1:9000' })).toEqual([
      'objectStorage.accessKeyId: environment variable KEY_ID is not set',
    ]);
    expect(loadJob(write(job), { S3_URL: 'http://x:1', KEY_ID: 'k' }).sections.objectStorage).toMatchObject({ endpoint: 'http://x:1' });
    // Said once: the empty string it stands for is not checked again ("the token must be at least 16
    // characters long" came after it).
    expect(problems({ ...base(), endpoint: { authToken: '${ORDERLY_TOKEN}' } })).toEqual([
      'endpoint.authToken: environment variable ORDERLY_TOKEN is not set',
    ]);
  });

  it('refuses a ${...} it does not substitute (a shell default) rather than keep it as the setting', () => {
    const job = {
      ...base(),
      objectStorage: { endpoint: '${S3_URL}', accessKeyId: '${KEY_ID:-minio}' },
      subscriptions: [
        { name: 'files', topic: 'events', cloudStorageConfig: { bucket: 'exports', filenamePrefix: '${ENV:-prod}/orders/' } },
      ],
    };
    expect(problems(job, { S3_URL: 'http://127.0.0.1:9000', KEY_ID: 'k', ENV: 'test' })).toEqual([
      'subscriptions[0].cloudStorageConfig.filenamePrefix: ${ENV:-prod} is not a reference Orderly substitutes: only ${NAME} is (letters, digits and _; no default or other shell form)',
      'objectStorage.accessKeyId: ${KEY_ID:-minio} is not a reference Orderly substitutes: only ${NAME} is (letters, digits and _; no default or other shell form)',
    ]);
    // Said once in a connector's section too, as in the job's own keys: the text it stayed, or the empty
    // string an unset variable became, is not checked again ("must be an http:// or https:// URL").
    expect(problems({ ...base(), objectStorage: { endpoint: '${EP:-http://127.0.0.1:9000}', idleTimeoutSeconds: '${IDLE}' } })).toEqual([
      'objectStorage.endpoint: ${EP:-http://127.0.0.1:9000} is not a reference Orderly substitutes: only ${NAME} is (letters, digits and _; no default or other shell form)',
      'objectStorage.idleTimeoutSeconds: environment variable IDLE is not set',
    ]);
    // A variable's value is not read for references: a secret may hold "${".
    expect(problems({ ...base(), objectStorage: { secretAccessKey: '${SECRET}' } }, { SECRET: 'a${b:-c}' })).toEqual([]);
  });

  it("checks topics' and subscriptions' labels by Google Cloud's rules", () => {
    const job = base();
    expect(
      problems({
        ...job,
        topics: [{ name: 'events', labels: { Team: 'sales' } }, { name: 'dead' }],
        subscriptions: [{ ...job.subscriptions[0], labels: { team: 'Sales' } }],
      }),
    ).toEqual([
      'topics[0].labels: label key "Team" must be 1-63 lowercase letters, digits, "_" or "-", starting with a lowercase letter',
      'subscriptions[0].labels.team: must be at most 63 lowercase letters, digits, "_" or "-", got "Sales"',
    ]);
  });

  it('refuses a key share of the window larger than the window', () => {
    expect(problems({ ...base(), memory: { messagesPerKey: 50_000 } })).toEqual([
      'memory.messagesPerKey: at most memory.messagesPerSubscription (20000), got 50000',
    ]);
    expect(problems({ ...base(), memory: { messagesPerKey: 50_000, messagesPerSubscription: 50_000 } })).toEqual([]);
    expect(problems({ ...base(), memory: { messagesPerSubscription: 500 } })).toEqual([]);
  });

  it('gives a number or a boolean setting the number or boolean a whole ${ENV} reference holds, and a string setting the string', () => {
    const job = {
      ...base(),
      metrics: { port: '${PORT}' },
      objectStorage: { embedded: '${EMBEDDED}', buckets: ['${BUCKET}'] },
      subscriptions: [{ name: 'pull-sub', topic: 'events', ackDeadlineSeconds: '${DEADLINE}', labels: { team: '${TEAM}' } }],
    };
    const env = { PORT: '9999', EMBEDDED: 'true', BUCKET: '12345', DEADLINE: '30', TEAM: '42' };
    const loaded = loadJob(write(job), env);
    expect(loaded.metrics).toEqual({ host: '127.0.0.1', port: 9999, allowRemote: false });
    expect(loaded.sections.objectStorage).toMatchObject({ embedded: true, buckets: ['12345'] });
    expect(loaded.subscriptions[0]).toMatchObject({ ackDeadlineSeconds: 30, labels: { team: '42' } });
    // A value that is not a number where one is needed is still refused, as is a number out of range.
    expect(problems(job, { ...env, PORT: 'abc', DEADLINE: '3' })).toEqual([
      'metrics.port: Invalid input: expected number, received string',
      'subscriptions[0].ackDeadlineSeconds: must be an integer between 10 and 600, got 3',
    ]);
    // Where a number does not help, the problem is the one the string has.
    expect(problems({ ...job, projectId: '${PROJECT}' }, { ...env, PROJECT: '12345' })).toEqual([
      'projectId: must be a Pub/Sub project id (6-30 lowercase letters, digits and "-", starting with a letter, not ending with "-"), got "12345"',
    ]);
  });
});

describe('job files that are not a tree of settings', () => {
  /** The JobConfigError's problems for a file with exactly this text (the error message starts with the path). */
  function refused(text: string, name = 'job.yaml'): string[] {
    const file = join(dir.path, name);
    writeFileSync(file, text);
    try {
      loadJob(file, {});
    } catch (e) {
      expect((e as Error).message.startsWith(`${file}: `)).toBe(true);
      return (e as { problems: string[] }).problems;
    }
    throw new Error(`${name} was accepted`);
  }
  let bomb = 'a: &a [x, x, x, x, x, x, x, x, x]\n';
  for (const [i, name] of ['b', 'c', 'd', 'e', 'f', 'g', 'h', 'i'].entries())
    bomb += `${name}: &${name} [${Array(9).fill(`*${'abcdefgh'[i]}`).join(', ')}]\n`;

  it.each<[string, string, string, string?]>([
    ['a self-referencing alias', 'a: &x [*x]\n', 'a[0]: a YAML alias that contains itself (a cycle); a job file must be a tree'],
    ['a mapping that contains itself', 'topics: &t\n  - { name: events, more: *t }\n', 'topics[0].more: a YAML alias that contains itself'],
    ['a document that is its own alias', '&x [*x]\n', 'the document is a list, not a mapping of settings'],
    ['an alias bomb ("billion laughs")', bomb, 'YAML aliases expand too far (over 100 alias uses); write the values out'],
    ['an empty file', '', 'the file is empty; a job file is a mapping of settings (see docs/configuration.md)'],
    ['a file of blank lines', '\n  \n\n', 'the file is empty'],
    ['an empty JSON file', '', 'the file is empty', 'job.json'],
    ['only comments', '# nothing yet\n', 'the file holds no settings (only comments or null); a job file is a mapping of settings'],
    ['a list', '- topics\n- subscriptions\n', 'the document is a list, not a mapping of settings (projectId, topics, subscriptions, ...)'],
    ['a number', '42\n', 'the document is a number, not a mapping of settings'],
    ['a JSON string', '"job"', 'the document is a string, not a mapping of settings', 'job.json'],
    ['two documents', 'topics: []\n---\nsubscriptions: []\n', 'line 2, column 1: not valid YAML: Source contains multiple documents'],
    ['a duplicate key', 'topics: []\ntopics: []\n', 'line 2, column 1: not valid YAML: Map keys must be unique'],
    [
      'an unknown tag',
      'projectId: !!js/function "x"\n',
      'line 1, column 12: not valid YAML: Unresolved tag: tag:yaml.org,2002:js/function',
    ],
    ['deep nesting', `labels: ${'['.repeat(40)}${']'.repeat(40)}\n`, 'nested deeper than 32 levels'],
    ['deep JSON nesting', `{"labels": ${'['.repeat(100_000)}${']'.repeat(100_000)}}`, 'nested deeper than 32 levels', 'job.json'],
    ['a 200 KB line of brackets', '['.repeat(100_000) + ']'.repeat(100_000), 'line 1, column'],
  ])('refuses %s, with the path and the problem', (_what, text, problem, name) => {
    const found = refused(text, name);
    expect(
      found.some((p) => p.includes(problem)),
      `got ${JSON.stringify(found)}`,
    ).toBe(true);
  });

  it(`refuses a file over ${MAX_JOB_FILE_BYTES} bytes from its size`, () => {
    const text = stringify(base()) + '#'.repeat(MAX_JOB_FILE_BYTES);
    expect(refused(text)).toEqual([`the file is ${Buffer.byteLength(text)} bytes; a job file may have at most 1048576 bytes (1 MiB)`]);
    // The limit itself is accepted: the cap is on size, not on what fits.
    const file = join(dir.path, 'job.yaml');
    const fits = stringify(base());
    writeFileSync(file, fits + '#'.repeat(MAX_JOB_FILE_BYTES - Buffer.byteLength(fits)));
    expect(loadJob(file).topics).toHaveLength(2);
  });

  it("takes YAML merge keys (<<), as compose files use them: a shared block's settings, overridden by the keys beside it", () => {
    const file = join(dir.path, 'job.yaml');
    writeFileSync(
      file,
      [
        'topics: [{ name: events }]',
        'subscriptions:',
        '  - &export { name: first, topic: events, ackDeadlineSeconds: 20, labels: { team: sales } }',
        '  - { <<: *export, name: second, ackDeadlineSeconds: 30 }',
        '  - { <<: [*export], name: third }',
        '',
      ].join('\n'),
    );
    expect(loadJob(file, {}).subscriptions.map(({ name, ackDeadlineSeconds, labels }) => ({ name, ackDeadlineSeconds, labels }))).toEqual([
      { name: 'first', ackDeadlineSeconds: 20, labels: { team: 'sales' } },
      { name: 'second', ackDeadlineSeconds: 30, labels: { team: 'sales' } },
      { name: 'third', ackDeadlineSeconds: 20, labels: { team: 'sales' } },
    ]);
  });

  it('still accepts aliases that share a block', () => {
    const file = join(dir.path, 'job.yaml');
    writeFileSync(
      file,
      [
        'topics: [{ name: events, labels: &team { team: sales } }]',
        'subscriptions:',
        '  - { name: first, topic: events, labels: *team }',
        '  - { name: second, topic: events, labels: *team }',
        '',
      ].join('\n'),
    );
    expect(loadJob(file, {}).subscriptions.map((s) => s.labels)).toEqual([{ team: 'sales' }, { team: 'sales' }]);
  });
});

describe('applying a changed job file to an existing data directory', () => {
  it('creates what is new, updates mutable fields, refuses immutable changes, deletes nothing', async () => {
    const logger = createLogger();
    const job = base();
    let runtime = await JobRuntime.start(loadJob(write(job)), logger, { mode: 'inspect' });
    expect(runtime.reconciled.created).toHaveLength(4);
    await runtime.stop();

    // The same file again changes nothing (no subscription is rewritten at every start).
    runtime = await JobRuntime.start(loadJob(write(job)), logger, { mode: 'inspect' });
    expect(runtime.reconciled).toEqual({ created: [], updated: [], unchanged: expect.any(Array), notInFile: [] });
    expect(runtime.reconciled.unchanged).toHaveLength(4);
    await runtime.stop();

    const changed = {
      ...job,
      topics: [...job.topics, { name: 'more' }],
      subscriptions: [{ ...job.subscriptions[0], ackDeadlineSeconds: 30 }],
    };
    runtime = await JobRuntime.start(loadJob(write(changed)), logger, { mode: 'inspect' });
    expect(runtime.reconciled).toEqual({
      created: ['projects/test-project/topics/more'],
      updated: ['projects/test-project/subscriptions/pull-sub'],
      unchanged: ['projects/test-project/topics/events', 'projects/test-project/topics/dead'],
      // Dropped from the file, not deleted: still exporting, so the report names it (the log said nothing).
      notInFile: ['projects/test-project/subscriptions/files'],
    });
    expect(runtime.core.getSubscription('pull-sub').ackDeadlineSeconds).toBe(30);
    expect(runtime.core.hasSubscription('files')).toBe(true);
    await runtime.stop();

    const immutable = { ...job, subscriptions: [{ ...job.subscriptions[0], enableMessageOrdering: false }] };
    await expect(JobRuntime.start(loadJob(write(immutable)), logger, { mode: 'inspect' })).rejects.toThrow(
      'subscriptions[0] (pull-sub): enableMessageOrdering cannot be changed after creation (is true); create a new subscription instead',
    );
  });

  it('a refused file changes nothing: what its earlier entries add is not created, and every refusal is named with the file', async () => {
    const logger = createLogger();
    const job = base();
    await (await JobRuntime.start(loadJob(write(job)), logger, { mode: 'inspect' })).stop();

    // An edit that renames the ordered subscription into a copy and, further down, changes what cannot change.
    const refused = {
      ...job,
      topics: [...job.topics, { name: 'more' }],
      subscriptions: [
        { name: 'pull-sub-v2', topic: 'events', enableMessageOrdering: true },
        { ...job.subscriptions[0], enableMessageOrdering: false },
        { ...job.subscriptions[1], filter: 'attributes:region' },
      ],
    };
    const file = write(refused);
    const error = await JobRuntime.start(loadJob(file), logger, { mode: 'inspect' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(JobConfigError);
    expect((error as JobConfigError).file).toBe(file);
    expect((error as JobConfigError).problems).toEqual([
      'subscriptions[1] (pull-sub): enableMessageOrdering cannot be changed after creation (is true); create a new subscription instead',
      'subscriptions[2] (files): filter cannot be changed after creation (is ""); create a new subscription instead',
    ]);

    // The file put back finds the data directory as it left it: no topic or subscription made by the refused start.
    const runtime = await JobRuntime.start(loadJob(write(job)), logger, { mode: 'inspect' });
    expect(runtime.reconciled).toEqual({ created: [], updated: [], unchanged: expect.any(Array), notInFile: [] });
    expect(runtime.core.hasTopic('more')).toBe(false);
    expect(runtime.core.hasSubscription('pull-sub-v2')).toBe(false);
    await runtime.stop();
  });

  it("a topic's labels and retention follow the file: set, changed and cleared at the next start (they had been left as first created)", async () => {
    const logger = createLogger();
    const job = base();
    const withTopic = (events: Record<string, unknown>) => ({ ...job, topics: [{ name: 'events', ...events }, { name: 'dead' }] });
    let runtime = await JobRuntime.start(loadJob(write(withTopic({ labels: { team: 'a' } }))), logger, { mode: 'inspect' });
    expect(runtime.core.getTopic('events')).toMatchObject({ labels: { team: 'a' } });
    expect(runtime.core.getTopic('events').messageRetentionDuration).toBeUndefined();
    await runtime.stop();

    runtime = await JobRuntime.start(loadJob(write(withTopic({ labels: { team: 'b' }, messageRetentionDuration: '1h' }))), logger, {
      mode: 'inspect',
    });
    expect(runtime.reconciled.updated).toEqual(['projects/test-project/topics/events']);
    expect(runtime.core.getTopic('events')).toMatchObject({ labels: { team: 'b' }, messageRetentionDuration: 3600 });
    await runtime.stop();

    runtime = await JobRuntime.start(loadJob(write(withTopic({}))), logger, { mode: 'inspect' });
    expect(runtime.reconciled.updated).toEqual(['projects/test-project/topics/events']);
    expect(runtime.core.getTopic('events').labels).toEqual({});
    expect(runtime.core.getTopic('events').messageRetentionDuration).toBeUndefined();
    await runtime.stop();

    expect(problems(withTopic({ messageRetentionDuration: '5m' }))).toEqual([
      'topics[0].messageRetentionDuration: must be between 600s and 2678400s, got 300s',
    ]);
  });

  it("a subscription's policies and export section left out of the file are cleared at the next start, as a topic's fields are (they had been kept)", async () => {
    const logger = createLogger();
    const job = base();
    const withSub = (sub: Record<string, unknown>) => ({ ...job, subscriptions: [{ name: 'pull-sub', topic: 'events', ...sub }] });
    let runtime = await JobRuntime.start(
      loadJob(
        write(
          withSub({
            deadLetterPolicy: { deadLetterTopic: 'dead', maxDeliveryAttempts: 5 },
            retryPolicy: { minimumBackoff: '1s' },
            expirationPolicy: { ttl: '31d' },
            cloudStorageConfig: { bucket: 'exports' },
          }),
        ),
      ),
      logger,
      { mode: 'inspect' },
    );
    await runtime.stop();

    // The export section changed to another kind: the old one goes (it was kept, and the two were refused together).
    runtime = await JobRuntime.start(loadJob(write(withSub({ bigqueryConfig: { table: 'test-project.main.t' } }))), logger, {
      mode: 'inspect',
    });
    expect(runtime.reconciled.updated).toEqual(['projects/test-project/subscriptions/pull-sub']);
    const changed = runtime.core.getSubscription('pull-sub');
    expect(changed.bigqueryConfig).toMatchObject({ table: 'test-project.main.t' });
    expect(changed.cloudStorageConfig).toBeUndefined();
    expect(changed.deadLetterPolicy).toBeUndefined();
    expect(changed.retryPolicy).toBeUndefined();
    expect(changed.expirationPolicy).toBeUndefined();
    await runtime.stop();

    // No export section: a pull subscription again.
    runtime = await JobRuntime.start(loadJob(write(withSub({}))), logger, { mode: 'inspect' });
    expect(runtime.core.getSubscription('pull-sub').bigqueryConfig).toBeUndefined();
    await runtime.stop();

    // Nothing left to clear: the next start leaves it as it is.
    runtime = await JobRuntime.start(loadJob(write(withSub({}))), logger, { mode: 'inspect' });
    expect(runtime.reconciled.updated).toEqual([]);
    await runtime.stop();
  });

  it("a subscription's pushConfig and policies taken out of the file are cleared at the next start: it stops pushing", async () => {
    const logger = createLogger();
    const job = base();
    const withSub = (sub: Record<string, unknown>) => ({ ...job, subscriptions: [{ name: 'orders', topic: 'events', ...sub }] });
    const pushed = withSub({
      pushConfig: { pushEndpoint: 'http://127.0.0.1:9/push' },
      retryPolicy: { minimumBackoff: '5s', maximumBackoff: '30s' },
      deadLetterPolicy: { deadLetterTopic: 'dead', maxDeliveryAttempts: 5 },
    });
    let runtime = await JobRuntime.start(loadJob(write(pushed)), logger, { mode: 'inspect' });
    expect(runtime.core.getSubscription('orders').pushConfig?.pushEndpoint).toBe('http://127.0.0.1:9/push');
    await runtime.stop();

    runtime = await JobRuntime.start(loadJob(write(withSub({}))), logger, { mode: 'inspect' });
    expect(runtime.reconciled.updated).toEqual(['projects/test-project/subscriptions/orders']);
    const sub = runtime.core.getSubscription('orders');
    expect([sub.pushConfig, sub.retryPolicy, sub.deadLetterPolicy]).toEqual([undefined, undefined, undefined]);
    // A pull subscription now: Pull is not refused as on a push subscription.
    await expect(runtime.core.pull('orders', { maxMessages: 1 })).resolves.toEqual([]);
    await runtime.stop();

    // Nothing left to clear: the next start leaves it as it is.
    runtime = await JobRuntime.start(loadJob(write(withSub({}))), logger, { mode: 'inspect' });
    expect(runtime.reconciled.updated).toEqual([]);
    await runtime.stop();
  });

  it('a push subscription takes pushConfig.noWrapper from the file (payload unwrapping), as through the API', async () => {
    const job = {
      ...base(),
      subscriptions: [
        { name: 'push-sub', topic: 'events', pushConfig: { pushEndpoint: 'http://127.0.0.1:9/p', noWrapper: { writeMetadata: true } } },
      ],
    };
    const runtime = await JobRuntime.start(loadJob(write(job)), createLogger(), { mode: 'inspect' });
    expect(runtime.core.getSubscription('push-sub').pushConfig).toMatchObject({ noWrapper: { writeMetadata: true } });
    await runtime.stop();
    expect(
      problems({
        ...job,
        subscriptions: [
          { ...job.subscriptions[0], pushConfig: { pushEndpoint: 'http://127.0.0.1:9/p', noWrapper: { writeMetadata: 'yes' } } },
        ],
      }),
    ).toEqual(['subscriptions[0].pushConfig.noWrapper.writeMetadata: Invalid input: expected boolean, received string']);
  });

  it('a subscription whose topic was deleted through the API says what to do at the next start', async () => {
    const job = loadJob(write(base()));
    const runtime = await JobRuntime.start(job, createLogger(), { mode: 'inspect' });
    await runtime.core.deleteTopic('events');
    await runtime.stop();
    await expect(JobRuntime.start(job, createLogger(), { mode: 'inspect' })).rejects.toThrow(
      `subscriptions[0] (pull-sub): its topic was deleted while it existed (through the API), which leaves it without a topic for good, as in Pub/Sub; delete the subscription (DELETE through \`orderly serve --data-dir ${job.dataDir}\``,
    );
  });

  it('creates a subscription by every rule, and keeps one created before a rule was tightened as it is (filter, exactly-once with push)', async () => {
    // A filter Pub/Sub refuses (AND beside OR) and exactly-once beside push: what Orderly accepted before.
    const legacy = {
      topic: 'events',
      filter: 'attributes:a AND attributes:b OR attributes:c',
      enableExactlyOnceDelivery: true,
      pushConfig: { pushEndpoint: 'http://127.0.0.1:9/push' },
    };
    const jobWith = (subscriptions: unknown[]) => loadJob(write({ ...base(), subscriptions }));
    const fresh = jobWith([{ name: 'fresh', ...legacy }]);
    await expect(JobRuntime.start(fresh, createLogger(), { mode: 'inspect' })).rejects.toThrow(
      'subscriptions[0].filter: AND and OR cannot be combined',
    );
    // The same settings as an older Orderly stored them: written into the store as it would have.
    const plain = jobWith([{ name: 'old', topic: 'events', filter: 'attributes:a' }]);
    await (await JobRuntime.start(plain, createLogger(), { mode: 'inspect' })).stop();
    const db = new Database(join(plain.dataDir, 'orderly.sqlite'));
    const { spec } = db.prepare("SELECT spec FROM subscriptions WHERE name LIKE '%/old'").get() as { spec: string };
    const stored = {
      ...JSON.parse(spec),
      filter: legacy.filter,
      enableExactlyOnceDelivery: true,
      pushConfig: { pushEndpoint: legacy.pushConfig.pushEndpoint, attributes: {} },
    };
    db.prepare("UPDATE subscriptions SET spec = ? WHERE name LIKE '%/old'").run(JSON.stringify(stored));
    db.close();
    // The file that describes it starts, and the subscription can still be changed where the rules do not reach.
    const runtime = await JobRuntime.start(jobWith([{ name: 'old', ...legacy }]), createLogger(), { mode: 'inspect' });
    try {
      await runtime.core.updateSubscription('old', { ackDeadlineSeconds: 20 });
      expect(runtime.core.getSubscription('old')).toMatchObject({
        filter: legacy.filter,
        ackDeadlineSeconds: 20,
        enableExactlyOnceDelivery: true,
      });
      // A change that touches a rule applies it.
      await expect(
        runtime.core.updateSubscription('old', { pushConfig: { pushEndpoint: '' }, bigqueryConfig: { table: 'p.d.t' } }),
      ).rejects.toThrow('exactly-once delivery is supported on pull subscriptions only, not with bigqueryConfig');
    } finally {
      await runtime.stop();
    }
  });

  it('names the file and the entry when the data directory refuses a subscription the file alone cannot (useTopicSchema on a topic without a schema)', async () => {
    const file = write({
      projectId: 'test-project',
      topics: [{ name: 'events' }],
      subscriptions: [
        { name: 'files', topic: 'events', cloudStorageConfig: { bucket: 'bucket-one', avroConfig: { useTopicSchema: true } } },
      ],
    });
    const start = JobRuntime.start(loadJob(file), createLogger(), { mode: 'inspect' });
    await expect(start).rejects.toThrow(
      `${file}: 1 problem\n  subscriptions[0].cloudStorageConfig.avroConfig.useTopicSchema: topic projects/test-project/topics/events has no schema`,
    );
    await expect(start).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });
});

describe('schemas in the job file', () => {
  const avro = (fields: unknown[]) => JSON.stringify({ type: 'record', name: 'Order', fields });
  const id = { name: 'id', type: 'string' };
  const schemaJob = (
    schema: Record<string, unknown>,
    schemaSettings: Record<string, unknown> | undefined = { schema: 'order', encoding: 'JSON' },
  ) => ({
    projectId: 'test-project',
    dataDir: './data',
    schemas: [{ name: 'order', type: 'AVRO', ...schema }],
    topics: [{ name: 'orders', ...(schemaSettings && { schemaSettings }) }],
    subscriptions: [{ name: 'files', topic: 'orders', cloudStorageConfig: { bucket: 'exports', avroConfig: { useTopicSchema: true } } }],
  });

  it('bring up a topic with a schema and an export writing with it from the file alone; a changed definition is a new revision', async () => {
    writeFileSync(join(dir.path, 'order.avsc'), avro([id]));
    const logger = createLogger();
    let runtime = await JobRuntime.start(loadJob(write(schemaJob({ definitionFile: 'order.avsc' }))), logger, { mode: 'inspect' });
    try {
      expect(runtime.reconciled.created).toEqual([
        'projects/test-project/schemas/order',
        'projects/test-project/topics/orders',
        'projects/test-project/subscriptions/files',
      ]);
      expect(runtime.core.getTopic('orders').schemaSettings).toEqual({ schema: 'projects/test-project/schemas/order', encoding: 'JSON' });
      // The schema is honoured: a message that does not conform is refused at publish.
      await expect(runtime.core.publish('orders', [{ data: '{"id": 1}' }])).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
      await runtime.core.publish('orders', [{ data: '{"id": "a"}' }]);
    } finally {
      await runtime.stop();
    }

    // A field added with a default (compatible): a new revision; the topic unchanged.
    const withNote = avro([id, { name: 'note', type: 'string', default: '' }]);
    runtime = await JobRuntime.start(loadJob(write(schemaJob({ definition: withNote }))), logger, { mode: 'inspect' });
    try {
      expect(runtime.reconciled.updated).toEqual(['projects/test-project/schemas/order']);
      const revisions = runtime.core.schemas.listRevisions({ name: 'projects/test-project/schemas/order', view: 'FULL' }).schemas;
      expect(revisions.map((r) => JSON.parse(r.definition!).fields.length)).toEqual([2, 1]);
    } finally {
      await runtime.stop();
    }

    // The same definition again changes nothing; a topic entry without schemaSettings keeps the topic's.
    runtime = await JobRuntime.start(loadJob(write(schemaJob({ definition: withNote }, undefined))), logger, { mode: 'inspect' });
    try {
      expect(runtime.reconciled.updated).toEqual([]);
      expect(runtime.core.getTopic('orders').schemaSettings?.schema).toBe('projects/test-project/schemas/order');
    } finally {
      await runtime.stop();
    }

    // A field removed without a default is incompatible with the earlier revisions, as CommitSchema says.
    const incompatible = write(schemaJob({ definition: avro([{ name: 'other', type: 'string' }]) }));
    await expect(JobRuntime.start(loadJob(incompatible), logger, { mode: 'inspect' })).rejects.toThrow(
      /^.*job\.yaml: 1 problem\n {2}schemas\[0\]\.schema\.definition: the new revision is incompatible with revision/,
    );
    const retyped = write(schemaJob({ type: 'PROTOCOL_BUFFER', definition: 'syntax = "proto3"; message Order { string id = 1; }' }));
    await expect(JobRuntime.start(loadJob(retyped), logger, { mode: 'inspect' })).rejects.toMatchObject({
      problems: [
        "schemas[0] (projects/test-project/schemas/order): the data directory's schema is AVRO, and a schema's type cannot change; give this entry another name",
      ],
    });
  });

  it('are checked by validate: the definition, where it comes from, and the schemas topics name', () => {
    expect(problems(schemaJob({ definition: '{"type": "record"}' }))).toEqual([expect.stringMatching(/^schemas\[0\]\.definition: /)]);
    expect(problems(schemaJob({ definition: avro([id]), definitionFile: 'x.avsc' }))).toEqual([
      'schemas[0].definition: give exactly one of definition (the text) and definitionFile (a file beside the job file)',
    ]);
    expect(problems(schemaJob({}))).toEqual([
      'schemas[0].definition: give exactly one of definition (the text) and definitionFile (a file beside the job file)',
    ]);
    expect(problems(schemaJob({ definitionFile: 'missing.avsc' }))).toEqual([
      expect.stringMatching(/^schemas\[0\]\.definitionFile: cannot read .*missing\.avsc: ENOENT/),
    ]);
    expect(problems(schemaJob({ definition: avro([id]) }, { schema: 'nope', encoding: 'JSON' }))).toEqual([
      'topics[0].schemaSettings.schema: no schema "nope" in schemas',
    ]);
    expect(problems(schemaJob({ definition: avro([id]) }, { schema: 'order', encoding: 'XML' }))).toEqual([
      expect.stringMatching(/^topics\[0\]\.schemaSettings\.encoding: /),
    ]);
    const once = schemaJob({ definition: avro([id]) });
    const twice = {
      ...once,
      schemas: [...once.schemas, { name: 'projects/test-project/schemas/order', type: 'AVRO', definition: avro([id]) }],
    };
    expect(problems(twice)).toEqual(['schemas[1].name: projects/test-project/schemas/order is listed twice in schemas']);
  });
});

describe('YAML syntax errors', () => {
  it('reports a broken YAML token once, not every token after it', () => {
    // A whole-value reference inside a flow mapping is not YAML (`{` opens a mapping in flow context).
    const file = join(dir.path, 'broken.yaml');
    writeFileSync(file, 'metrics: { port: ${PORT} }\ntopics:\n  - name: events\n  - name: dead\nsubscriptions: []\n');
    let found: string[] = [];
    try {
      loadJob(file, { PORT: '9464' });
    } catch (e) {
      found = (e as { problems: string[] }).problems;
    }
    expect(found).toEqual([
      expect.stringMatching(/^line 1, column \d+: not valid YAML: .* \(then \d+ more errors, most likely caused by this one\)$/),
    ]);
  });
});

describe('export sections', () => {
  it("refuses the export configs' output-only state, which a job file could set to anything for no effect", () => {
    const job = {
      ...base(),
      subscriptions: [
        { name: 'table-sub', topic: 'events', bigqueryConfig: { table: 'p.main.t', state: 'NOT_FOUND' } },
        { name: 'files', topic: 'events', cloudStorageConfig: { bucket: 'exports', state: 'banana' } },
      ],
    };
    expect(problems(job)).toEqual([
      "subscriptions[0].bigqueryConfig.state: output only (the sink's state, which orderly status shows), not a setting",
      "subscriptions[1].cloudStorageConfig.state: output only (the sink's state, which orderly status shows), not a setting",
    ]);
    const remote = {
      dataDir: './data',
      objectStorage: { endpoint: 'http://127.0.0.1:9' },
      remote: {
        endpoint: '127.0.0.1:9',
        exports: [{ subscription: 'exp-sub', cloudStorageConfig: { bucket: 'exports', state: 'ACTIVE' } }],
      },
    };
    expect(problems(remote)).toEqual([
      "remote.exports[0].cloudStorageConfig.state: output only (the sink's state, which orderly status shows), not a setting",
    ]);
  });

  it("a value checked against a field set aside for its own problem is not reported against that field's default", () => {
    const sub = (extra: Record<string, unknown>) => ({ ...base(), subscriptions: [{ name: 'exp-sub', topic: 'events', ...extra }] });
    // maximumBackoff 5s is below the given 700s, whose problem is its own; against the default 10s it said "below".
    expect(problems(sub({ retryPolicy: { minimumBackoff: '700s', maximumBackoff: '5s' } }))).toEqual([
      expect.stringMatching(/^subscriptions\[0\]\.retryPolicy\.minimumBackoff: /),
    ]);
    expect(problems(sub({ messageRetentionDuration: '1s', expirationPolicy: { ttl: '2d' } }))).toEqual([
      expect.stringMatching(/^subscriptions\[0\]\.messageRetentionDuration: /),
    ]);
    // A ttl under a day is wrong whatever the retention, and said so without quoting the default retention
    // (it said "at least messageRetentionDuration (604800s)" for a file that gave 300s).
    expect(problems(sub({ messageRetentionDuration: '5m', expirationPolicy: { ttl: '1h' } }))).toEqual([
      'subscriptions[0].messageRetentionDuration: must be between 600s and 2678400s, got 300s',
      'subscriptions[0].expirationPolicy.ttl: must be at least 1 day (86400s), got 3600s',
    ]);
  });

  it('lists every problem of a subscription and of its export section at once, not one a run', () => {
    const job = {
      ...base(),
      subscriptions: [
        {
          name: 'exp-sub',
          topic: 'events',
          retryPolicy: { minimumBackoff: '700s' },
          ackDeadlineSeconds: 5,
          cloudStorageConfig: {
            bucket: 'bucket-one',
            maxDuration: '30s',
            maxMessages: 10,
            shards: 100,
            parquetConfig: { compression: 'LZ4' },
          },
        },
      ],
    };
    expect(problems(job)).toEqual([
      expect.stringMatching(/^subscriptions\[0\]\.ackDeadlineSeconds: /),
      expect.stringMatching(/^subscriptions\[0\]\.retryPolicy\.minimumBackoff: /),
      expect.stringMatching(/^subscriptions\[0\]\.cloudStorageConfig\.parquetConfig\.compression: /),
      expect.stringMatching(/^subscriptions\[0\]\.cloudStorageConfig\.maxDuration: /),
      expect.stringMatching(/^subscriptions\[0\]\.cloudStorageConfig\.maxMessages: /),
      expect.stringMatching(/^subscriptions\[0\]\.cloudStorageConfig\.shards: /),
    ]);
  });

  it("a bad bucket or table hides none of the section's other problems", () => {
    // The required field was checked first: set aside, it was missing, and the checking ended there.
    const job = {
      ...base(),
      subscriptions: [
        { name: 'to-table', topic: 'events', bigqueryConfig: { table: 'bad', writeMetadata: 'yes', serviceAccountEmail: 'nope' } },
        { name: 'to-files', topic: 'events', cloudStorageConfig: { bucket: 'B', maxDuration: '30s', shards: 65 } },
      ],
    };
    expect(problems(job)).toEqual([
      expect.stringMatching(/^subscriptions\[0\]\.bigqueryConfig\.writeMetadata: /),
      expect.stringMatching(/^subscriptions\[0\]\.bigqueryConfig\.serviceAccountEmail: /),
      expect.stringMatching(/^subscriptions\[0\]\.bigqueryConfig\.table: must be "project\.dataset\.table", got "bad"/),
      expect.stringMatching(/^subscriptions\[1\]\.cloudStorageConfig\.maxDuration: /),
      expect.stringMatching(/^subscriptions\[1\]\.cloudStorageConfig\.shards: /),
      expect.stringMatching(/^subscriptions\[1\]\.cloudStorageConfig\.bucket: must be a bucket name/),
    ]);
  });

  it('an empty one is refused by its connector, naming what it needs, instead of making a pull subscription', () => {
    const sub = (extra: Record<string, unknown>) => ({ ...base(), subscriptions: [{ name: 'exp-sub', topic: 'events', ...extra }] });
    expect(problems(sub({ bigqueryConfig: {} }))).toEqual([expect.stringMatching(/^subscriptions\[0\]\.bigqueryConfig\.table: /)]);
    expect(problems(sub({ bigqueryConfig: { table: null } }))).toEqual([
      expect.stringMatching(/^subscriptions\[0\]\.bigqueryConfig\.table: /),
    ]);
    expect(problems(sub({ cloudStorageConfig: {} }))).toEqual([expect.stringMatching(/^subscriptions\[0\]\.cloudStorageConfig\.bucket: /)]);
    expect(problems(sub({ cloudStorageConfig: { bucket: '' } }))).toEqual([
      expect.stringMatching(/^subscriptions\[0\]\.cloudStorageConfig\.bucket: /),
    ]);
  });

  it("refuses useTopicSchema on a remote export: a remote topic's schema is not read, so every message would be refused", () => {
    const remoteJob = (exported: Record<string, unknown>) => ({
      projectId: 'test-project',
      dataDir: './data',
      duckdb: { path: './data/x.duckdb' },
      objectStorage: { endpoint: 'http://127.0.0.1:9000', accessKeyId: 'k', secretAccessKey: 's' },
      remote: { endpoint: '127.0.0.1:8085', exports: [{ subscription: 'events', ...exported }] },
    });
    const why = "a remote topic's schema is not read; leave useTopicSchema unset for a remote export";
    expect(problems(remoteJob({ cloudStorageConfig: { bucket: 'exports', avroConfig: { useTopicSchema: true } } }))).toEqual([
      `remote.exports[0].cloudStorageConfig.avroConfig.useTopicSchema: ${why}`,
    ]);
    expect(problems(remoteJob({ bigqueryConfig: { table: 'p.main.events', useTopicSchema: true } }))).toEqual([
      `remote.exports[0].bigqueryConfig.useTopicSchema: ${why}`,
    ]);
    expect(problems(remoteJob({ cloudStorageConfig: { bucket: 'exports', avroConfig: { writeMetadata: true } } }))).toEqual([]);
    // Another invalid field of remote (and an unknown one) hides none of its exports' problems.
    const job = remoteJob({ bigqueryConfig: { table: 'p.main.events', useTopicSchema: true } });
    const found = problems({ ...job, remote: { ...job.remote, streams: 0, colour: 'red' } });
    expect(found).toHaveLength(3);
    expect(found).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^remote\.streams: /),
        expect.stringMatching(/^remote\.colour: unknown/),
        `remote.exports[0].bigqueryConfig.useTopicSchema: ${why}`,
      ]),
    );
  });

  // Both were passed on unchecked: every worker then started, and failed or retried at the remote, on what
  // `orderly validate` had called valid.
  it('refuses a remote subscription name and a remote project the Pub/Sub API would refuse, naming each', () => {
    const remoteJob = (remote: Record<string, unknown>) => ({
      projectId: 'test-project',
      objectStorage: { endpoint: 'http://127.0.0.1:9000', accessKeyId: 'k', secretAccessKey: 's' },
      remote: { endpoint: '127.0.0.1:8085', ...remote },
    });
    const exportOf = (subscription: string) => ({ subscription, cloudStorageConfig: { bucket: 'exports', textConfig: {} } });
    expect(
      problems(
        remoteJob({
          projectId: 'My Project',
          exports: ['sub one', 'projects/p/subscriptions', 'projects/p/topics/t', 'events'].map(exportOf),
        }),
      ),
    ).toEqual([
      'remote.exports[0].subscription: invalid id "sub one": 3-255 characters, starting with a letter, of letters, digits and - _ . ~ + %, not starting with "goog"',
      'remote.exports[1].subscription: expected projects/{project}/subscriptions/{id} or a bare id, got "projects/p/subscriptions"',
      'remote.exports[2].subscription: expected a subscription name, got projects/p/topics/t',
      'remote.projectId: invalid project "My Project" (10 characters): at most 255 characters, without whitespace or control characters, and not "." or ".."',
    ]);
    // A legacy domain-scoped project and full names in other projects are Pub/Sub's own.
    expect(
      problems(
        remoteJob({ projectId: 'example.com:analytics', exports: ['events', 'projects/other-project/subscriptions/orders'].map(exportOf) }),
      ),
    ).toEqual([]);
  });
});

describe('push settings', () => {
  it('take stallSeconds as a whole number of seconds from 1 to 3600 (default 30), and refuse any other', () => {
    expect(loadJob(write(base())).push).toEqual({ allowLinkLocal: false, stallSeconds: 30 });
    expect(loadJob(write({ ...base(), push: { stallSeconds: 2 } })).push).toEqual({ allowLinkLocal: false, stallSeconds: 2 });
    expect([0, 1.5, 3601, '30s'].flatMap((stallSeconds) => problems({ ...base(), push: { stallSeconds } }))).toEqual([
      'push.stallSeconds: Too small: expected number to be >=1',
      'push.stallSeconds: Invalid input: expected int, received number',
      'push.stallSeconds: Too big: expected number to be <=3600',
      'push.stallSeconds: Invalid input: expected number, received string',
    ]);
  });
});

describe('memory settings', () => {
  it('take sizes as bytes or with units, default to a bounded process, and refuse what is not a size', () => {
    expect(loadJob(write(base())).memory).toEqual({
      payloadBytes: 64 * 1024 * 1024,
      messagesPerKey: 1_000,
      exportBytes: 64 * 1024 * 1024,
      duckdb: 128 * 1024 * 1024,
      duckdbTables: 32 * 1024 * 1024,
      duckdbThreads: 2,
      duckdbTableThreads: 1,
      // Unset: each process chooses (test/job/heap-growth.test.ts), and an export's connector may ask for
      // less window, budget and heap growth (test/job/export-memory.test.ts).
    });
    for (const unset of ['heapGrowthPercent', 'messagesPerSubscription', 'exportMessages'])
      expect(Object.keys(loadJob(write(base())).memory)).not.toContain(unset);
    const job = loadJob(write({ ...base(), memory: { payloadBytes: '16MiB', duckdb: '1GB', exportBytes: 1_000_000 } }));
    expect(job.memory).toMatchObject({ payloadBytes: 16 * 1024 * 1024, duckdb: 1e9, exportBytes: 1_000_000, messagesPerKey: 1_000 });
    expect(
      problems({
        ...base(),
        memory: { payloadBytes: 'lots', messagesPerKey: 0, duckdbTableThreads: 0, heapGrowthPercent: 5, ram: 1 },
      }).concat(problems({ ...base(), memory: { duckdbTableThreads: 1.5 } })),
    ).toEqual([
      'memory.payloadBytes: a size like 64MiB, 512MB or a number of bytes',
      'memory.messagesPerKey: Too small: expected number to be >=1',
      'memory.duckdbTableThreads: Too small: expected number to be >=1',
      'memory.heapGrowthPercent: Too small: expected number to be >=10',
      'memory.ram: unknown key (a typo? see docs/configuration.md)',
      'memory.duckdbTableThreads: Invalid input: expected int, received number',
    ]);
  });

  it('bound the size a string stands for as they bound a number: no 0, no Infinity, no DuckDB too small to commit', () => {
    const huge = `${'9'.repeat(400)}GiB`;
    expect(
      problems({ ...base(), memory: { exportBytes: '0', payloadBytes: '0.1b', duckdb: '8MiB', messagesPerKey: 5 } }).concat(
        problems({ ...base(), memory: { payloadBytes: huge, exportBytes: '99999999999999999999', duckdb: 0 } }),
      ),
    ).toEqual([
      'memory.payloadBytes: at least 1 byte',
      'memory.exportBytes: at least 1 byte',
      'memory.duckdb: at least 16,777,216 bytes',
      'memory.payloadBytes: at most 9,007,199,254,740,991 bytes',
      'memory.exportBytes: at most 9,007,199,254,740,991 bytes',
      'memory.duckdb: at least 16,777,216 bytes',
    ]);
    expect(loadJob(write({ ...base(), memory: { exportBytes: '1b', duckdb: '16MiB' } })).memory).toMatchObject({
      exportBytes: 1,
      duckdb: 16 * 1024 * 1024,
    });
  });
});
