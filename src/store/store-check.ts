/**
 * The whole-file integrity check of a store (SQLite's quick_check), on the thread store-writer.ts starts
 * for the process's checks, one per store opened. It reads every page: ~0.7 s for a million 1 KB messages on
 * the 2-core machine, time the writer thread's first commit used to wait, so a larger backlog meant a longer
 * wait for the first durable publish or ack after every start. On its own read connection it sees the file
 * as it was when the check began (WAL), while the writer commits meanwhile.
 */
import Database from 'better-sqlite3';
import { parentPort } from 'node:worker_threads';
import type { CheckReply } from './store-writer.js';

/** SQLite's own word that the file is damaged or unreadable, as opposed to the check not getting to run. */
const DAMAGE = /^SQLITE_(CORRUPT|NOTADB|IOERR)/;

function check(file: string): Omit<CheckReply, 'id'> {
  try {
    const db = new Database(file, { readonly: true, fileMustExist: true });
    try {
      return { found: String(db.pragma('quick_check(1)', { simple: true })) };
    } finally {
      db.close();
    }
  } catch (e) {
    if (e instanceof Database.SqliteError && DAMAGE.test(e.code)) return { found: `${e.code}: ${e.message}` };
    // The check could not run (no such file, ...): this check fails, the thread goes on with the next.
    return { error: `it could not run: ${e instanceof Error ? e.message : String(e)}` };
  }
}

parentPort!.on('message', ({ id, file }: { id: number; file: string }) => parentPort!.postMessage({ id, ...check(file) }));
