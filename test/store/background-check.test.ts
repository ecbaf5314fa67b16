import Database from 'better-sqlite3';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { checkStoreFile, DamageFound, StoreWriter, type FileCheck, type WriterFailure } from '../../src/store/store-writer.js';
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

/** A whole-file check that reports only when the test says so; its thread ends when stopped, or (`holdThread`) when the test says. */
function heldCheck(holdThread = false): FileCheck & { report: (found?: Error) => void; end: () => void; stopped: boolean } {
  let report!: (found?: Error) => void;
  let end!: () => void;
  const result = new Promise<void>((resolve, reject) => (report = (found) => (found ? reject(found) : resolve())));
  const ended = new Promise<void>((resolve) => (end = resolve));
  if (!holdThread) end();
  const check = {
    result,
    report,
    end,
    stopped: false,
    stop: () => {
      check.stopped = true;
      return ended;
    },
  };
  return check;
}

/** A store file with the schema, and a writer on it whose check the test holds. */
async function writerWithHeldCheck(holdThread = false) {
  await SqliteStore.open(dir.path).close();
  const file = join(dir.path, 'orderly.sqlite');
  const check = heldCheck(holdThread);
  const failures: [string, WriterFailure][] = [];
  const writer = new StoreWriter(
    file,
    'FULL',
    (e, kind) => {
      failures.push([e.message, kind]);
      return new Error(`reported: ${e.message}`);
    },
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
  return { file, check, failures, writer, committed };
}

describe("the store's whole-file check runs beside its writes", () => {
  it('writes commit while the check runs; once it finds damage, the store is told once and every later write fails', async () => {
    const { check, failures, writer, committed } = await writerWithHeldCheck();
    // Before, the first write waited for the check, which takes ~0.7 s per million messages.
    await writer.submit({ kind: 'append', messages: [message(1), message(2)] });
    expect(committed()).toBe(2);

    check.report(new DamageFound('integrity check failed: *** in database main *** Page 7: btreeInitPage() returns error code 11'));
    await expect(writer.submit({ kind: 'append', messages: [message(3)] })).rejects.toThrow(/^reported: .*Page 7/);
    await expect(writer.submit({ kind: 'ack', subscription: 's', seqs: [1] })).rejects.toThrow(/Page 7/);
    expect(committed()).toBe(2);
    expect(failures).toEqual([[expect.stringMatching(/integrity check failed/), 'damaged']]);
    await writer.close();
    expect(check.stopped).toBe(true);
  });

  it('a check that could not run stops the writes too, told apart from damage', async () => {
    const { check, failures, writer } = await writerWithHeldCheck();
    check.report(new Error('its thread exited (code 1) without a result'));
    await expect(writer.submit({ kind: 'append', messages: [message(1)] })).rejects.toThrow(/without a result/);
    expect(failures).toEqual([['its thread exited (code 1) without a result', 'unchecked']]);
    await writer.close();
  });

  it('compaction waits for the check (its vacuum moves pages)', async () => {
    const { check, failures, writer } = await writerWithHeldCheck();
    await writer.submit({ kind: 'append', messages: [message(1)] });
    let compacted = false;
    const compaction = writer.compact({ watermarks: new Map(), topics: new Map(), keepFromSeq: new Map() }).then(() => (compacted = true));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(compacted).toBe(false);
    check.report();
    await compaction;
    await writer.close();
    expect(check.stopped).toBe(true);
    expect(failures).toEqual([]);
  });

  it('closing the store ends a check still running, and that is no failure', async () => {
    const { check, failures, writer } = await writerWithHeldCheck();
    await writer.submit({ kind: 'append', messages: [message(1)] });
    await writer.close();
    expect(check.stopped).toBe(true);
    expect(failures).toEqual([]);
  });

  it('a check that cannot even start is one that could not run', async () => {
    await SqliteStore.open(dir.path).close();
    const failures: [string, WriterFailure][] = [];
    const writer = new StoreWriter(
      join(dir.path, 'orderly.sqlite'),
      'FULL',
      (e, kind) => {
        failures.push([e.message, kind]);
        return e;
      },
      () => {
        throw new Error('no threads left');
      },
    );
    await expect(writer.submit({ kind: 'append', messages: [message(1)] })).rejects.toThrow('no threads left');
    expect(failures).toEqual([['no threads left', 'unchecked']]);
    await writer.close();
  });

  it("a writer closes only once its check's thread has ended, so the store's folder may go right after", async () => {
    // The check's thread was terminated instead, mid-call: better-sqlite3 aborted the whole process when
    // SQLite then failed in it (the folder removed), "FATAL ERROR: v8::ToLocalChecked Empty MaybeLocal".
    const { check, writer } = await writerWithHeldCheck(true);
    let closed = false;
    const closing = writer.close().then(() => (closed = true));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect([check.stopped, closed]).toEqual([true, false]);
    check.end();
    await closing;
    expect(closed).toBe(true);
  });

  it('the real check: finds nothing in a sound store; once stopped, it reports nothing', async () => {
    await SqliteStore.open(dir.path).close();
    const file = join(dir.path, 'orderly.sqlite');
    await expect(checkStoreFile(file).result).resolves.toBeUndefined();
    const stopped = checkStoreFile(join(dir.path, 'no-such-file.sqlite'));
    void stopped.stop();
    await expect(stopped.result).resolves.toBeUndefined();
    await expect(checkStoreFile(join(dir.path, 'no-such-file.sqlite')).result).rejects.toThrow(
      /could not run: unable to open database file/,
    );
  });
});
