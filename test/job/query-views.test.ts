import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import '../../examples/jsonl-file-connector/src/index.js';
import { emptyResult, registerConnector } from '../../src/connector/index.js';
import { bareJob } from '../../src/job/job-config.js';
import { JobRuntime } from '../../src/job/job-runtime.js';
import { queryJob } from '../../src/job/query.js';
import { queryViewNames } from '../../src/job/query-view-names.js';
import { createLogger } from '../../src/log.js';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait-for.js';

describe('query view names', () => {
  it('are the ids with "-" as "_" in the job\'s project, and full names (escaped) where those would meet or for other projects', () => {
    const names = queryViewNames(
      [
        'projects/p/subscriptions/orders-to-files',
        'projects/p/subscriptions/a-b',
        'projects/p/subscriptions/a_b',
        'projects/p/subscriptions/Orders',
        'projects/p/subscriptions/orders',
        'projects/q/subscriptions/x',
      ],
      'p',
    );
    expect(Object.fromEntries(names)).toEqual({
      'projects/p/subscriptions/orders-to-files': 'orders_to_files',
      'projects/p/subscriptions/a-b': 'projects/p/subscriptions/a-b',
      'projects/p/subscriptions/a_b': 'projects/p/subscriptions/a_b',
      // DuckDB compares names ignoring case.
      'projects/p/subscriptions/Orders': 'projects/p/subscriptions/%4Frders',
      'projects/p/subscriptions/orders': 'projects/p/subscriptions/orders',
      'projects/q/subscriptions/x': 'projects/q/subscriptions/x',
    });
    expect(new Set([...names.values()].map((n) => n.toLowerCase())).size).toBe(names.size);
  });
});

describe('orderly query views', () => {
  let dir: ReturnType<typeof tempDir>;
  let runtime: JobRuntime;
  beforeEach(async () => {
    dir = tempDir();
    runtime = await JobRuntime.start(bareJob(join(dir.path, 'data')), createLogger());
  });
  afterEach(async () => {
    await runtime.stop();
    dir.remove();
  });

  it('one per export subscription, in every project, never one for two (a-b and a_b)', async () => {
    const { core } = runtime;
    await core.createTopic('events');
    await core.createTopic('projects/other-project/topics/events');
    const exportTo = (file: string) => ({ connector: 'jsonl-file', path: join(dir.path, file) });
    await core.createSubscription('a-b', { topic: 'events', exportConfig: exportTo('dash.jsonl') });
    await core.createSubscription('a_b', { topic: 'events', exportConfig: exportTo('underscore.jsonl') });
    await core.createSubscription('projects/other-project/subscriptions/a-b', {
      topic: 'projects/other-project/topics/events',
      exportConfig: exportTo('other.jsonl'),
    });
    await core.createSubscription('plain', { topic: 'events', exportConfig: exportTo('plain.jsonl') });
    await core.publish('events', [{ data: 'one' }]);
    await core.publish('projects/other-project/topics/events', [{ data: 'two' }, { data: 'three' }]);
    await waitFor('the exports', () => core.allSubscriptions().every((s) => core.metrics(s.name).backlogMessages === 0));
    const count = async (view: string) => (await queryJob(runtime, `SELECT count(*)::INT AS n, min(data) AS first FROM "${view}"`))[0];
    expect(await count('projects/orderly-local/subscriptions/a-b')).toEqual({ n: 1, first: 'one' });
    expect(await count('projects/orderly-local/subscriptions/a_b')).toEqual({ n: 1, first: 'one' });
    expect(await count('projects/other-project/subscriptions/a-b')).toEqual({ n: 2, first: 'three' });
    expect(await count('plain')).toEqual({ n: 1, first: 'one' });
    await expect(queryJob(runtime, 'SELECT * FROM a_b')).rejects.toThrow(/a_b does not exist/);

    // A sink that cannot be read fails only the queries that need its view, and they say why.
    appendFileSync(join(dir.path, 'plain.jsonl'), '{not json\n');
    expect(await count('projects/orderly-local/subscriptions/a-b')).toEqual({ n: 1, first: 'one' });
    await expect(count('plain')).rejects.toThrow(
      /plain does not exist[\s\S]*views not available: projects\/orderly-local\/subscriptions\/plain: /,
    );
  });

  it("the example connector's view has its line's columns and types, before the first line too", async () => {
    const { core } = runtime;
    await core.createTopic('events');
    await core.createSubscription('events-to-file', {
      topic: 'events',
      enableMessageOrdering: true,
      exportConfig: { connector: 'jsonl-file', path: join(dir.path, 'events.jsonl') },
    });
    // The example's README query, before anything was exported: it had failed, the empty view having only `id`.
    expect(await queryJob(runtime, 'SELECT key, count(*) FROM events_to_file GROUP BY ALL')).toEqual([]);
    // Data that looks like a date stays the text it was, not a DATE read_json guessed.
    await core.publish('events', [{ data: '2026-12-06', orderingKey: 'u1' }]);
    await waitFor('the export', () => core.metrics('events-to-file').backlogMessages === 0);
    expect(await queryJob(runtime, 'SELECT key, sequence, data, typeof(data) AS type FROM events_to_file')).toEqual([
      { key: 'u1', sequence: '1', data: '2026-12-06', type: 'VARCHAR' },
    ]);
  });

  it('a query naming the subscription of a connector without views says that connector offers none, not only "does not exist"', async () => {
    // A connector that writes nowhere anyone can query: no queryView.
    registerConnector({
      name: 'no-view',
      parseConfig: () => ({}),
      create: () => ({
        open: async () => {},
        write: async (batch) => ({ ...emptyResult(), written: batch.map((m) => m.id) }),
        flush: async () => emptyResult(),
        close: async () => {},
      }),
    });
    await runtime.core.createTopic('events');
    await runtime.core.createSubscription('to-nowhere', { topic: 'events', exportConfig: { connector: 'no-view' } });
    await expect(queryJob(runtime, 'SELECT * FROM to_nowhere')).rejects.toThrow(
      /to_nowhere does not exist[\s\S]*no view: projects\/orderly-local\/subscriptions\/to-nowhere: its connector "no-view" offers no query view of it/,
    );
    // A query of another missing table is not about that subscription.
    await expect(queryJob(runtime, 'SELECT * FROM elsewhere')).rejects.toThrow(/^(?![\s\S]*no view)[\s\S]*elsewhere does not exist/);
  });

  it("never hides a table of the database: a view whose name the database's main schema holds takes the full name, with a note", async () => {
    const { core } = runtime;
    await core.createTopic('events');
    await core.createSubscription('orders', {
      topic: 'events',
      exportConfig: { connector: 'jsonl-file', path: join(dir.path, 'o.jsonl') },
    });
    await core.publish('events', [{ data: 'exported' }]);
    await waitFor('the export', () => core.metrics('orders').backlogMessages === 0);
    await queryJob(runtime, "CREATE TABLE ORDERS AS SELECT 'table row' AS data");
    const notes: string[] = [];
    const read = (sql: string) => queryJob(runtime, sql, (note) => notes.push(note));
    // The view stood in front of the table, under both names: the table could not be read at all.
    expect(await read('SELECT data FROM orders')).toEqual([{ data: 'table row' }]);
    expect(await read('SELECT data FROM main.orders')).toEqual([{ data: 'table row' }]);
    expect(await read('SELECT data FROM "projects/orderly-local/subscriptions/orders"')).toEqual([{ data: 'exported' }]);
    expect(notes[0]).toBe(
      'projects/orderly-local/subscriptions/orders: its view is "projects/orderly-local/subscriptions/orders": the database has a table or view named orders',
    );
  });

  it('answers every column, also a repeated name beside a column called name:1, and one called __proto__', async () => {
    const sql = 'SELECT 1 AS a, 2 AS a, 3 AS "a:1", 4 AS "__proto__"';
    // The repeated a was answered as a:1 and overwritten by the column a:1 (2 lost); __proto__ vanished.
    const expected = '[{"a":1,"a:2":2,"a:1":3,"__proto__":4}]';
    expect(JSON.stringify(await queryJob(runtime, sql))).toBe(expected);
    const streamed: Record<string, unknown>[] = [];
    await queryJob(runtime, sql, undefined, (rows) => void streamed.push(...rows));
    expect(JSON.stringify(streamed)).toBe(expected);
  });

  it('a query of comments or semicolons alone is an invalid argument saying so (it was "Error in native callback")', async () => {
    for (const sql of [';;', '/* nothing */', '-- nothing'])
      await expect(queryJob(runtime, sql)).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: 'the query holds no statement (only comments or semicolons): give the query to run',
      });
  });
});
