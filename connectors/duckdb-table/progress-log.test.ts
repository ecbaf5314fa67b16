import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PROGRESS_TABLE, ProgressLog } from './progress-log.js';

const subscription = { name: 'projects/p/subscriptions/s', uid: 'uid-1' };
let instance: DuckDBInstance;
let connection: DuckDBConnection;

beforeEach(async () => {
  instance = await DuckDBInstance.create(':memory:');
  connection = await instance.connect();
});
afterEach(() => {
  connection.closeSync();
  instance.closeSync();
});

async function open(): Promise<ProgressLog> {
  await ProgressLog.create(connection);
  return ProgressLog.load(connection, subscription);
}

async function commit(log: ProgressLog, batch: [string, number, number][]): Promise<[string, [number, number]][]> {
  const { recorded, committed } = await log.append(connection, new Map(batch.map(([key, first, last]) => [key, [first, last]])));
  committed();
  return [...recorded];
}

const rangesOf = (log: ProgressLog, key: string) => [...log.ranges()].filter(([k]) => k === key).map(([, first, last]) => [first, last]);

describe("the DuckDB writer's progress log", () => {
  it("keeps each key's written ranges: a batch past the highest extends it, one below stands apart until the gap is written", async () => {
    const log = await open();
    expect(await commit(log, [['k', 4, 6]])).toEqual([['k', [4, 6]]]);
    // Filtered messages leave gaps in a key's sequences: a later batch of an ordered subscription extends the range.
    expect(await commit(log, [['k', 8, 9]])).toEqual([['k', [4, 9]]]);
    // A seek back brings 1 and 2, which the table never had.
    expect(await commit(log, [['k', 1, 2]])).toEqual([['k', [1, 2]]]);
    expect(rangesOf(log, 'k')).toEqual([
      [1, 2],
      [4, 9],
    ]);
    expect(rangesOf(await ProgressLog.load(connection, subscription), 'k')).toEqual([
      [1, 2],
      [4, 9],
    ]);
    await commit(log, [['k', 3, 3]]);
    expect(rangesOf(log, 'k')).toEqual([[1, 9]]);
    expect(rangesOf(await ProgressLog.load(connection, subscription), 'k')).toEqual([[1, 9]]);
  });

  it('a compaction writes every range of every key, and what it loads is what was written', async () => {
    const log = await open();
    await commit(log, [['k', 5, 6]]);
    await commit(log, [['k', 1, 2]]);
    // More rows than 8 per key (of at least 1,000 keys): the log is rewritten, one row per range.
    await commit(
      log,
      Array.from({ length: 8_001 }, (_, i): [string, number, number] => [`x${i}`, 1, 1]),
    );
    const rows = await connection.runAndReadAll(`SELECT count(*) FROM ${PROGRESS_TABLE}`);
    expect(Number(rows.getRows()[0]![0])).toBe(8_003);
    const loaded = await ProgressLog.load(connection, subscription);
    expect(rangesOf(loaded, 'k')).toEqual([
      [1, 2],
      [5, 6],
    ]);
    expect(rangesOf(loaded, 'x8000')).toEqual([[1, 1]]);
  });

  it('reads a table from before ranges as 1 to each last sequence', async () => {
    await connection.run(
      `CREATE TABLE ${PROGRESS_TABLE}(subscription_uid VARCHAR, subscription VARCHAR, ordering_key VARCHAR, last_sequence BIGINT)`,
    );
    await connection.run(`INSERT INTO ${PROGRESS_TABLE} VALUES ('uid-1', 's', 'k', 3), ('uid-1', 's', 'k', 5)`);
    const log = await open();
    expect(rangesOf(log, 'k')).toEqual([[1, 5]]);
    expect(await commit(log, [['k', 6, 7]])).toEqual([['k', [1, 7]]]);
    expect(rangesOf(await ProgressLog.load(connection, subscription), 'k')).toEqual([[1, 7]]);
  });
});
