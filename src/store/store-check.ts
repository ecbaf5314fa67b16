/**
 * The whole-file integrity check of a store (SQLite's quick_check), on a thread of its own that
 * store-writer.ts starts when a store opens. It reads every page: ~0.7 s for a million 1 KB messages on
 * the 2-core machine, time the writer thread's first commit used to wait, so a larger backlog meant a longer
 * wait for the first durable publish or ack after every start. On its own read connection it sees the file
 * as it was when the check began (WAL), while the writer commits meanwhile.
 */
import Database from 'better-sqlite3';
import { parentPort, workerData } from 'node:worker_threads';

/** SQLite's own word that the file is damaged or unreadable, as opposed to the check not getting to run. */
const DAMAGE = /^SQLITE_(CORRUPT|NOTADB|IOERR)/;

const { file } = workerData as { file: string };
let found: string;
try {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    found = String(db.pragma('quick_check(1)', { simple: true }));
  } finally {
    db.close();
  }
} catch (e) {
  if (!(e instanceof Database.SqliteError && DAMAGE.test(e.code))) throw e;
  found = `${e.code}: ${e.message}`;
}
parentPort!.postMessage(found);
