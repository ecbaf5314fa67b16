/**
 * The whole-file integrity check of a store (SQLite's quick_check), on a thread of its own that
 * store-writer.ts starts when a store opens. It reads every page: ~0.7 s for a million 1 KB messages on
 * the 2-core machine, time the writer thread's first commit used to wait, so a larger backlog meant a longer
 * wait for the first durable publish or ack after every start. On its own read connection it sees the file
 * as it was when the check began (WAL), while the writer commits meanwhile.
 */
import Database from 'better-sqlite3';
import { parentPort, workerData } from 'node:worker_threads';

const { file } = workerData as { file: string };
const db = new Database(file, { readonly: true, fileMustExist: true });
try {
  parentPort!.postMessage(String(db.pragma('quick_check(1)', { simple: true })));
} finally {
  db.close();
}
