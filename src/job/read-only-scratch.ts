import { existsSync, mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { STORE_FILE, STORE_ID_FILE } from '../store/sqlite-store.js';

/**
 * For a read-only command (`orderly query` without --write, `orderly audit`) on a data directory that never held a store
 * (a job never run, or a fleet worker's folder, which a query's own worker id never has): a new directory
 * under the system's temp dir to open the job in instead, which the caller removes when done; undefined
 * when the command should open `dataDir` itself. Opened there, the job answers as a never-run one does
 * (an empty store: no subscriptions, so no views; an empty embedded S3 server) without leaving the data
 * directory, its lock, store, S3 folder or a worker folder behind. A path that is not a directory, or one
 * whose store is gone but named by its id file, is opened as it is, for the error that names it.
 */
export function readOnlyScratch(dataDir: string): string | undefined {
  return neverHeldStore(dataDir) ? mkdtempSync(join(tmpdir(), 'orderly-read-only-')) : undefined;
}

/**
 * Whether `dataDir` is missing, or a directory without a store and without the id file that would name
 * one: a job that never ran there. False for anything else, a path that is not a directory included.
 */
export function neverHeldStore(dataDir: string): boolean {
  try {
    if (!statSync(dataDir).isDirectory()) return false;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'ENOENT';
  }
  return !existsSync(join(dataDir, STORE_FILE)) && !existsSync(join(dataDir, STORE_ID_FILE));
}
