import Database from 'better-sqlite3';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import type { StoredMessage } from '../../src/store/store.js';
import { tempDirPerTest } from '../helpers/temp-dir-per-test.js';

const dir = tempDirPerTest();

const message = (seq: number, data = `m${seq}`): StoredMessage => ({
  seq,
  topicUid: 1,
  orderingKey: 'k',
  keySeq: seq,
  publishTime: 0,
  data: Buffer.from(data),
  attributes: {},
});
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));
/** Frames in the store's WAL: each commit appends one per page it changed (32 KiB pages). */
const walFrames = () => (statSync(join(dir.path, 'orderly.sqlite-wal')).size - 32) / (32 * 1024 + 24);

describe('group commits on the writer thread', () => {
  it('writes queued behind a busy commit commit together; each resolves only once committed, and one that fails fails alone', async () => {
    const store = SqliteStore.open(dir.path);
    await store.append([message(1)]);
    // A reader's snapshot keeps the WAL from restarting, so its frames count every commit from here on.
    const reader = new Database(join(dir.path, 'orderly.sqlite'), { readonly: true });
    reader.exec('BEGIN');
    reader.prepare('SELECT count(*) FROM messages').get();
    const framesBefore = walFrames();
    // Another connection holds the write lock: the writer thread's next commit waits (busy_timeout), and
    // every write sent meanwhile queues up behind it, each in a request of its own (one per turn).
    const blocker = new Database(join(dir.path, 'orderly.sqlite'));
    blocker.exec('BEGIN IMMEDIATE');
    const settled: (string | undefined)[] = [];
    const results: Promise<void>[] = [];
    for (let seq = 2; seq <= 40; seq++) {
      // seq 20 reuses seq 1: a primary key conflict, in the middle of the queue.
      const i = results.length;
      const write = store.append([message(seq === 20 ? 1 : seq)]);
      results.push(write);
      write.then(
        () => (settled[i] = 'ok'),
        (e: Error) => (settled[i] = e.message),
      );
      await nextTurn();
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(settled.filter((s) => s !== undefined)).toEqual([]); // nothing is answered before its commit
    blocker.exec('COMMIT');
    await Promise.allSettled(results);
    blocker.close();
    // One commit per write would add at least a frame per write (a message changes its table's page and
    // two index pages): far fewer frames than writes means they were committed together.
    expect(walFrames() - framesBefore).toBeLessThan(results.length / 2);
    reader.exec('COMMIT');
    reader.close();

    expect(settled.filter((s) => s !== 'ok')).toEqual([expect.stringMatching(/UNIQUE constraint failed: messages\.seq/)]);
    expect(settled.indexOf(settled.find((s) => s !== 'ok'))).toBe(18); // the write of seq 20
    await store.close();

    const db = new Database(join(dir.path, 'orderly.sqlite'), { readonly: true });
    const rows = db.prepare('SELECT seq, CAST(data AS TEXT) AS data FROM messages ORDER BY seq').all() as { seq: number; data: string }[];
    db.close();
    const expected = Array.from({ length: 40 }, (_, i) => i + 1).filter((seq) => seq !== 20);
    expect(rows).toEqual(expected.map((seq) => ({ seq, data: `m${seq}` })));
  });
});
