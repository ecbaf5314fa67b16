import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CommittedRanges } from '../../src/connector/committed-ranges.js';
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

/** The log, and the ranges it keeps (those a writer's redelivery filter checks). */
async function open(): Promise<{ log: ProgressLog; written: CommittedRanges }> {
  await ProgressLog.create(connection);
  return load();
}

async function load(): Promise<{ log: ProgressLog; written: CommittedRanges }> {
  const written = new CommittedRanges();
  return { log: await ProgressLog.load(connection, subscription, written), written };
}

async function commit(log: ProgressLog, batch: [string, number, number][]): Promise<void> {
  const apply = await log.append(connection, new Map(batch.map(([key, first, last]) => [key, [first, last]])));
  apply();
}

const rangesOf = (written: CommittedRanges, key: string) =>
  [...written.entries()].filter(([k]) => k === key).map(([, first, last]) => [first, last]);
const loadedRangesOf = async (key: string) => rangesOf((await load()).written, key);

/** The log's rows of `key`, in the order appended. */
async function rowsOf(key: string): Promise<[number, number][]> {
  const rows = await connection.runAndReadAll(
    `SELECT first_sequence, last_sequence FROM ${PROGRESS_TABLE} WHERE ordering_key = $1 ORDER BY rowid`,
    [key],
  );
  return rows.getRows().map(([first, last]) => [Number(first), Number(last)]);
}

describe("the DuckDB writer's progress log", () => {
  it("keeps each key's written ranges: a batch past the highest extends it, one below stands apart until the gap is written", async () => {
    const { log, written } = await open();
    await commit(log, [['k', 4, 6]]);
    // Filtered messages leave gaps in a key's sequences: a later batch of an ordered subscription extends the range.
    await commit(log, [['k', 8, 9]]);
    // A seek back brings 1 and 2, which the table never had.
    await commit(log, [['k', 1, 2]]);
    expect(await rowsOf('k')).toEqual([
      [4, 6],
      [4, 9],
      [1, 2],
    ]);
    expect(rangesOf(written, 'k')).toEqual([
      [1, 2],
      [4, 9],
    ]);
    expect(await loadedRangesOf('k')).toEqual([
      [1, 2],
      [4, 9],
    ]);
    await commit(log, [['k', 3, 3]]);
    expect(rangesOf(written, 'k')).toEqual([[1, 9]]);
    expect(await loadedRangesOf('k')).toEqual([[1, 9]]);
  });

  it('a compaction writes every range of every key, and what it loads is what was written', async () => {
    const { log } = await open();
    await commit(log, [['k', 5, 6]]);
    await commit(log, [['k', 1, 2]]);
    await commit(log, [['k', 7, 8]]);
    // More rows than 8 per key (of at least 1,000 keys): the log is rewritten, one row per written range
    // and one per range of the batch (k's extends 5-8 to 5-9; load unites them).
    await commit(log, [['k', 9, 9], ...Array.from({ length: 8_000 }, (_, i): [string, number, number] => [`x${i}`, 1, 1])]);
    const rows = await connection.runAndReadAll(`SELECT count(*) FROM ${PROGRESS_TABLE}`);
    expect(Number(rows.getRows()[0]![0])).toBe(8_003);
    expect(await rowsOf('k')).toEqual([
      [1, 2],
      [5, 8],
      [5, 9],
    ]);
    expect(await loadedRangesOf('k')).toEqual([
      [1, 2],
      [5, 9],
    ]);
    expect(await loadedRangesOf('x7999')).toEqual([[1, 1]]);
  });

  it('reads a table from before ranges as 1 to each last sequence', async () => {
    await connection.run(
      `CREATE TABLE ${PROGRESS_TABLE}(subscription_uid VARCHAR, subscription VARCHAR, ordering_key VARCHAR, last_sequence BIGINT)`,
    );
    await connection.run(`INSERT INTO ${PROGRESS_TABLE} VALUES ('uid-1', 's', 'k', 3), ('uid-1', 's', 'k', 5)`);
    const { log, written } = await open();
    expect(rangesOf(written, 'k')).toEqual([[1, 5]]);
    await commit(log, [['k', 6, 7]]);
    expect((await rowsOf('k')).at(-1)).toEqual([1, 7]);
    expect(await loadedRangesOf('k')).toEqual([[1, 7]]);
  });
});
