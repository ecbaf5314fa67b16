import Database from 'better-sqlite3';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { StoreWriter, type FileCheck } from '../../src/store/store-writer.js';
import type { StoredMessage } from '../../src/store/store.js';
import { tempDirPerTest } from '../helpers/temp-dir-per-test.js';

const dir = tempDirPerTest();

const message = (seq: number): StoredMessage => ({
  seq,
  topicUid: 1,
  orderingKey: 'k',
  keySeq: seq,
  publishTime: 0,
  data: Buffer.from(`m${seq}`),
  attributes: {},
});

/** A whole-file check that reports only when the test says so. */
function heldCheck(): FileCheck & { report: (found?: Error) => void; stopped: boolean } {
  let report!: (found?: Error) => void;
  const result = new Promise<void>((resolve, reject) => (report = (found) => (found ? reject(found) : resolve())));
  const check = { result, report, stopped: false, stop: () => (check.stopped = true) };
  return check;
}

describe("the store's whole-file check runs beside its writes", () => {
  it('writes commit while the check runs; once it finds damage, the store is told once and every later write fails', async () => {
    await SqliteStore.open(dir.path).close(); // the schema
    const file = join(dir.path, 'orderly.sqlite');
    const check = heldCheck();
    const failures: Error[] = [];
    const writer = new StoreWriter(
      file,
      'FULL',
      (e) => failures.push(e),
      () => check,
    );
    const committed = () => {
      const db = new Database(file, { readonly: true });
      try {
        return db.prepare('SELECT count(*) FROM messages').pluck().get();
      } finally {
        db.close();
      }
    };

    // Before this change the first write waited for the check, which takes ~0.7 s per million messages.
    await writer.submit({ kind: 'append', messages: [message(1), message(2)] });
    expect(committed()).toBe(2);

    check.report(new Error('integrity check failed: *** in database main *** Page 7: btreeInitPage() returns error code 11'));
    await expect(writer.submit({ kind: 'append', messages: [message(3)] })).rejects.toThrow(/Page 7/);
    await expect(writer.submit({ kind: 'ack', subscription: 's', seqs: [1] })).rejects.toThrow(/Page 7/);
    expect(committed()).toBe(2);
    expect(failures.map((e) => e.message)).toEqual([expect.stringMatching(/integrity check failed/)]);
    await writer.close();
    expect(check.stopped).toBe(true);
  });

  it('closing the store ends a check still running, and that is no failure', async () => {
    await SqliteStore.open(dir.path).close();
    const file = join(dir.path, 'orderly.sqlite');
    const check = heldCheck();
    const failures: Error[] = [];
    const writer = new StoreWriter(
      file,
      'FULL',
      (e) => failures.push(e),
      () => check,
    );
    await writer.submit({ kind: 'append', messages: [message(1)] });
    await writer.close();
    expect(check.stopped).toBe(true);
    expect(failures).toEqual([]);
  });
});
