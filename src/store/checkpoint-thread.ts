/**
 * The stores' checkpoint thread (one per process; see store-writer.ts): every CHECKPOINT_EVERY_MS it copies
 * each open store's WAL back into the database file (a PASSIVE checkpoint), on a connection of its own.
 * A checkpoint runs alongside the writer thread's commits instead of between them: one can take tens or
 * hundreds of milliseconds on a busy disk, and every publish waiting for a commit would wait for it too.
 */
import Database from 'better-sqlite3';
import { parentPort as parent } from 'node:worker_threads';
import type { ThreadReply, ThreadRequest } from './store-writer.js';

if (!parent) throw new Error('checkpoint-thread.ts runs as a worker thread of store-writer.ts');
const parentPort = parent;

const CHECKPOINT_EVERY_MS = 200;
const stores = new Map<number, Database.Database>();

parentPort.on('message', (msg: ThreadRequest) => {
  const reply: ThreadReply = { id: msg.id };
  try {
    if (msg.op === 'open') {
      const db = new Database(msg.file, { fileMustExist: true });
      db.pragma(`synchronous = ${msg.synchronous}`);
      db.pragma('wal_autocheckpoint = 0');
      stores.set(msg.store, db);
    } else if (msg.op === 'close') {
      stores.get(msg.store)?.close();
      stores.delete(msg.store);
    } else throw new Error(`the checkpoint thread does not ${msg.op}`);
  } catch (e) {
    reply.error = e instanceof Error ? e.message : String(e);
  }
  parentPort.postMessage(reply);
});

setInterval(() => {
  for (const db of stores.values()) {
    try {
      db.pragma('wal_checkpoint(PASSIVE)');
    } catch {
      // Busy: the next round retries.
    }
  }
}, CHECKPOINT_EVERY_MS).unref();
