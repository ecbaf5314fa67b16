import { readdirSync, rmdirSync, rmSync, statSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { pathSegment } from '../connector/sink-paths.js';
import { OrderlyError } from '../core/errors.js';
import { HOLD_FILE, LOCK_FILE, readLock, type LockInfo } from './job-lock.js';

const WORKER_ID = /^[A-Za-z0-9._-]{1,64}$/;

/**
 * This process's worker id, for a job that exports from a remote Pub/Sub: `--worker-id`, else
 * ORDERLY_WORKER_ID, else the job's `remote.workerId`, else `<host>-<pid>` (new for every process).
 */
export function resolveWorkerId(flag: string | undefined, fromJob: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  const given = flag ?? env.ORDERLY_WORKER_ID ?? fromJob;
  if (given !== undefined) {
    if (!WORKER_ID.test(given))
      throw new OrderlyError('INVALID_ARGUMENT', `worker id ${JSON.stringify(given)}: must be 1-64 letters, digits, ".", "_" or "-"`);
    return given;
  }
  const host =
    hostname()
      .replace(/[^A-Za-z0-9._-]+/g, '-')
      .slice(0, 48) || 'host';
  return `${host}-${process.pid}`;
}

/**
 * Where one worker keeps what is its own (its lock, an empty local store, spill files): several workers
 * of one job on one machine share the job's data directory but never a file in it.
 */
export function workerDir(dataDir: string, workerId: string): string {
  return join(dataDir, 'workers', pathSegment(workerId));
}

/**
 * What a worker does last, once it holds its folder's lock: it empties the folder while still holding the
 * lock (its spill files are uploaded or come again), then releases the lock and removes the folder, unless
 * another process of the same worker id has started in it meanwhile.
 */
export function leaveWorkerDir(dir: string, releaseLock: () => void): () => void {
  return () => {
    for (const name of readdirSync(dir))
      if (name !== LOCK_FILE && name !== HOLD_FILE) rmSync(join(dir, name), { recursive: true, force: true });
    releaseLock();
    // Unless a process of the same worker id holds the folder now (its lock written), the hold file goes too.
    if (!readLock(dir)) rmSync(join(dir, HOLD_FILE), { force: true });
    try {
      rmdirSync(dir);
    } catch {
      // not empty: a process of the same worker id started meanwhile, and the folder is its own now
    }
  };
}

/** The workers of a job running on this machine now, with what their locks say (pid, metrics URL). */
export function localWorkers(dataDir: string): { workerId: string; dir: string; lock: LockInfo }[] {
  return workerDirs(dataDir).flatMap(({ workerId, dir }) => {
    const lock = readLock(dir);
    return lock ? [{ workerId, dir, lock }] : [];
  });
}

/**
 * Removes the folders of this machine's workers that are gone (killed, or ended without cleaning up):
 * their spill files hold nothing that was acked. A folder younger than a minute is left alone (its
 * worker may be starting and not hold its lock yet).
 */
export function sweepGoneWorkers(dataDir: string, now = Date.now()): void {
  for (const { dir } of workerDirs(dataDir)) {
    let age: number;
    try {
      age = now - statSync(dir).mtimeMs;
    } catch {
      continue;
    }
    if (age > 60_000 && !readLock(dir)) rmSync(dir, { recursive: true, force: true });
  }
}

function workerDirs(dataDir: string): { workerId: string; dir: string }[] {
  const root = join(dataDir, 'workers');
  let names: string[];
  try {
    names = readdirSync(root);
  } catch {
    return [];
  }
  // Worker ids are path segments as they are (letters, digits, ".", "_", "-").
  return names.map((name) => ({ workerId: name, dir: join(root, name) }));
}
