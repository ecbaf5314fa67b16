import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/** How often the worker copies committed WAL frames into the database files. */
const INTERVAL_MS = 200;

const WORKER_SOURCE = `
  const { workerData, parentPort } = require('node:worker_threads');
  const Database = require(workerData.sqlite);
  const open = new Map();
  setInterval(() => {
    for (const db of open.values()) {
      try { db.pragma('wal_checkpoint(PASSIVE)'); } catch { /* busy: the next round retries */ }
    }
  }, workerData.interval);
  parentPort.on('message', ({ op, id, file }) => {
    if (op === 'attach') {
      try { open.set(id, new Database(file)); } catch { /* no checkpoints for it: the WAL grows until close */ }
      return;
    }
    open.get(id)?.close();
    open.delete(id);
    parentPort.postMessage(id);
  });`;

let shared: { worker: Worker; detaching: Map<number, () => void>; nextId: number; exited: boolean } | undefined;

function sharedWorker(): NonNullable<typeof shared> {
  if (shared) return shared;
  const sqlite = createRequire(import.meta.url).resolve('better-sqlite3');
  const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { sqlite, interval: INTERVAL_MS } });
  const state = { worker, detaching: new Map<number, () => void>(), nextId: 0, exited: false };
  worker.on('message', (id: number) => {
    state.detaching.get(id)?.();
    state.detaching.delete(id);
    if (state.detaching.size === 0) worker.unref();
  });
  // Checkpointing is an optimisation: if the worker dies, WALs only grow until their stores close.
  worker.on('error', () => undefined);
  worker.on('exit', () => {
    state.exited = true;
    for (const done of state.detaching.values()) done();
    if (shared === state) shared = undefined;
  });
  worker.unref();
  shared = state;
  return state;
}

/**
 * Runs a store's SQLite WAL checkpoints on a worker thread (one per process, a connection per store)
 * instead of inside the commit that crosses `wal_autocheckpoint` on the main thread: there they took
 * about a third of every publish's store time (bench/core.ts). PASSIVE checkpoints never block the
 * writer; durability is the WAL's (a committed transaction is in the WAL before its promise resolves),
 * so a crash between checkpoints loses nothing: the next open replays the WAL.
 */
export class WalCheckpointer {
  private readonly id: number;
  private readonly shared = sharedWorker();

  constructor(file: string) {
    this.id = ++this.shared.nextId;
    this.shared.worker.postMessage({ op: 'attach', id: this.id, file });
  }

  /** Resolves once the worker has closed its connection to the file. */
  stop(): Promise<void> {
    const { worker, detaching, exited } = this.shared;
    if (exited) return Promise.resolve();
    return new Promise((resolve) => {
      detaching.set(this.id, resolve);
      worker.ref(); // the reply must arrive before the process may exit
      worker.postMessage({ op: 'detach', id: this.id });
    });
  }
}
