import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/** How often the worker copies committed WAL frames into the database file. */
const INTERVAL_MS = 200;

/**
 * Runs SQLite's WAL checkpoints on a worker thread, through its own connection, instead of inside the
 * commit that crosses `wal_autocheckpoint` on the main thread: there they took about a third of every
 * publish's store time (bench/core.ts). PASSIVE checkpoints never block the writer; durability is the
 * WAL's (a committed transaction is in the WAL before its promise resolves), so a crash between
 * checkpoints loses nothing: the next open replays the WAL.
 */
export class WalCheckpointer {
  private readonly worker: Worker;

  constructor(file: string) {
    const sqlite = createRequire(import.meta.url).resolve('better-sqlite3');
    this.worker = new Worker(
      `const { workerData, parentPort } = require('node:worker_threads');
       const db = new (require(workerData.sqlite))(workerData.file);
       const timer = setInterval(() => {
         try { db.pragma('wal_checkpoint(PASSIVE)'); } catch { /* busy or closing: the next round retries */ }
       }, workerData.interval);
       parentPort.on('message', () => { clearInterval(timer); db.close(); parentPort.close(); });`,
      { eval: true, workerData: { sqlite, file, interval: INTERVAL_MS } },
    );
    // Checkpointing is an optimisation: without it the WAL only grows until the store closes.
    this.worker.on('error', () => undefined);
    this.worker.unref();
  }

  async stop(): Promise<void> {
    const exited = new Promise((resolve) => this.worker.once('exit', resolve));
    this.worker.ref(); // keeps the process alive until the worker has closed its connection
    this.worker.postMessage('stop');
    await exited;
  }
}
