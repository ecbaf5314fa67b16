import Database from 'better-sqlite3';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { OrderlyError } from '../core/errors.js';
import { checkDataDirWritable } from './data-dir-unwritable.js';

export interface LockInfo {
  pid: number;
  /**
   * When the process started (Linux: clock ticks after boot, field 22 of /proc/<pid>/stat): a pid alone
   * may since have been reused by another process.
   */
  startTime?: string;
  metrics?: string;
  /** host:port of the running job's Pub/Sub endpoint, if it serves one. */
  endpoint?: string;
  /**
   * Held by a command that opens the directory for its own work and lets go when done (query, audit,
   * status, publish), not by a running job: it serves nothing, and waiting for it is the remedy.
   */
  briefly?: boolean;
  /**
   * Held by a job (orderly run, serve) that has not finished starting (opening its store, its exports):
   * `metrics` and `endpoint` are written once it serves them. A start takes seconds at a large backlog, and
   * a lock without them read as a job configured to serve neither.
   */
  starting?: boolean;
}

const procfs = existsSync('/proc/self/stat');

/** The lock's file name inside the data directory. */
export const LOCK_FILE = 'orderly.lock';

/**
 * Beside the lock: a SQLite file whose exclusive lock (an OS file lock, gone with the process however it
 * ends) the holder keeps. Reading the lock file and then writing it left a gap in which two processes
 * starting at once both found it free and both ran the directory. Never removed while in use: a process
 * that opened the old file would lock it while a newer one locked a new file of the same name.
 */
export const HOLD_FILE = 'orderly.lock.db';

/** The data directories this process holds, by absolute path (a job's start takes its lock twice). */
const held = new Map<string, Database.Database>();

/** Takes the directory's OS lock, or says another process has it. */
function hold(dataDir: string): boolean {
  const key = resolve(dataDir);
  if (held.has(key)) return true;
  const file = join(dataDir, HOLD_FILE);
  const created = !existsSync(file);
  let db: Database.Database | undefined;
  try {
    db = new Database(file, { timeout: 0 });
    // Never committed: the exclusive lock is held until the database is closed.
    db.exec('BEGIN EXCLUSIVE');
  } catch (e) {
    db?.close();
    const code = (e as { code?: string }).code ?? '';
    if (code === 'SQLITE_BUSY') return false;
    // A file this start made and could not lock (a full disk) is not left behind.
    if (created) for (const f of [file, `${file}-journal`]) rmSync(f, { force: true });
    throw new OrderlyError(
      code.startsWith('SQLITE_FULL') ? 'RESOURCE_EXHAUSTED' : 'FAILED_PRECONDITION',
      `cannot lock the data directory ${dataDir} (${file}): ${(e as Error).message}`,
    );
  }
  held.set(key, db);
  return true;
}

function unhold(dataDir: string): void {
  const key = resolve(dataDir);
  held.get(key)?.close();
  held.delete(key);
}

/**
 * The job file's dataDir naming a file (or a path through one): a setting to correct, exit 2, where Node's
 * ENOTDIR or EEXIST named neither the setting nor the cause.
 */
function notADirectory(dataDir: string, e: unknown): OrderlyError | undefined {
  const code = (e as NodeJS.ErrnoException).code;
  if (code !== 'ENOTDIR' && code !== 'EEXIST') return undefined;
  return new OrderlyError('INVALID_ARGUMENT', `dataDir: ${dataDir} is not a directory: a file is there, or on its path`);
}

/** One process runs a data directory: `orderly run` holds `<dataDir>/orderly.lock` while it runs. */
export function readLock(dataDir: string): LockInfo | undefined {
  const file = join(dataDir, LOCK_FILE);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    // Node's message for a lock file that is a directory ("EISDIR: illegal operation on a directory, read")
    // names no file.
    throw (
      notADirectory(dataDir, e) ??
      new OrderlyError(
        'FAILED_PRECONDITION',
        `cannot read the lock file ${file}: ${(e as Error).message}; if no orderly process runs on ${dataDir}, remove it`,
      )
    );
  }
  // Locks are written whole (renamed into place); an empty one names no process.
  if (!text.trim()) return undefined;
  let info: LockInfo;
  try {
    info = JSON.parse(text) as LockInfo;
  } catch {
    throw new OrderlyError(
      'FAILED_PRECONDITION',
      `the lock file ${file} is not readable JSON; if no orderly process runs on ${dataDir}, remove it`,
    );
  }
  return isRunning(info) ? info : undefined;
}

export function acquireLock(dataDir: string, info: Omit<LockInfo, 'pid' | 'startTime'> = {}): () => void {
  try {
    mkdirSync(dataDir, { recursive: true });
  } catch (e) {
    throw notADirectory(dataDir, e) ?? e;
  }
  checkDataDirWritable(dataDir);
  const holding = held.has(resolve(dataDir));
  const free = hold(dataDir);
  // A lock file naming another live process counts too (one written by an Orderly that took no OS lock).
  const running = readLock(dataDir);
  if (!free || (running && running.pid !== process.pid)) {
    if (free && !holding) unhold(dataDir);
    if (running?.briefly) throw heldBriefly(dataDir, running);
    // Held, but its lock file not written yet: a job starting at this very moment.
    const who = running ? ` (pid ${running.pid})` : '';
    throw new OrderlyError(
      'FAILED_PRECONDITION',
      `the data directory ${dataDir} is in use by a running job${who}; stop it first${running?.metrics ? `, or read ${running.metrics}/status` : ''}`,
    );
  }
  const file = join(dataDir, LOCK_FILE);
  const lock: LockInfo = { pid: process.pid, startTime: processIdentity(process.pid)?.startTime, ...info };
  // Written aside and renamed: a crash never leaves a half-written lock behind.
  const aside = `${file}.${process.pid}`;
  try {
    writeFileSync(aside, JSON.stringify(lock));
    renameSync(aside, file);
  } catch (e) {
    // Node's message for a failed write names no file ("ENOSPC: no space left on device, write"); nor is
    // the half-written file left behind.
    rmSync(aside, { force: true });
    if (!holding) unhold(dataDir);
    const error = e as NodeJS.ErrnoException;
    throw new OrderlyError(
      error.code === 'ENOSPC' ? 'RESOURCE_EXHAUSTED' : 'FAILED_PRECONDITION',
      `cannot write the lock file ${file} of the data directory ${dataDir}: ${error.message}`,
    );
  }
  return () => {
    rmSync(file, { force: true });
    unhold(dataDir);
  };
}

/** How long a job's start waits for a command holding the directory briefly (a status, a publish: seconds). */
export const BRIEF_HOLDER_WAIT_MS = 30_000;

/**
 * acquireLock for a job's start (orderly run, serve): a command holding the directory briefly is waited
 * for, up to BRIEF_HOLDER_WAIT_MS, rather than refused. A supervisor restarting a job killed while a
 * monitor's `orderly status` ran had the restart refused (status reads the store itself once the job is
 * gone), and the job stayed down.
 */
export async function acquireJobLock(
  dataDir: string,
  info: Omit<LockInfo, 'pid' | 'startTime'>,
  waiting: (holder: LockInfo) => void,
): Promise<() => void> {
  const deadline = Date.now() + BRIEF_HOLDER_WAIT_MS;
  let told = false;
  for (;;) {
    try {
      return acquireLock(dataDir, info);
    } catch (e) {
      const holder = readLock(dataDir);
      // No lock file after a brief holder's: it is letting go (its file is removed before its OS lock).
      if (!(holder ? holder.briefly : told) || Date.now() >= deadline) throw e;
      if (!told && holder) waiting(holder);
      told = true;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

/**
 * The lock of the job running on `dataDir`, if one runs, for a command that would reach it (its status, its
 * endpoint): a command holding the directory briefly runs no job to reach, and is refused as what it is.
 */
export function runningJobLock(dataDir: string): LockInfo | undefined {
  const lock = readLock(dataDir);
  if (lock?.briefly) throw heldBriefly(dataDir, lock);
  if (lock?.starting) throw stillStarting(dataDir, lock);
  return lock;
}

/** The refusal while the job is starting (LockInfo.starting): it was told to add the metrics or endpoint section it has. */
function stillStarting(dataDir: string, lock: LockInfo): OrderlyError {
  return new OrderlyError(
    'FAILED_PRECONDITION',
    `the job running on ${dataDir} (pid ${lock.pid}) is still starting (opening its store and exports, seconds at a large backlog); its status and endpoint are served once it has started: try again in a moment`,
  );
}

/** The refusal while another command holds the directory briefly (LockInfo.briefly): it was called a running job. */
function heldBriefly(dataDir: string, lock: LockInfo): OrderlyError {
  return new OrderlyError(
    'FAILED_PRECONDITION',
    `the data directory ${dataDir} is in use by another orderly command (pid ${lock.pid}: a query, audit, status or publish), not a running job; try again once it has finished`,
  );
}

/**
 * Whether the lock's process still runs. `kill(pid, 0)` alone is not enough: it also succeeds for a process
 * that was killed but not yet reaped (a zombie), and for an unrelated process that got the same pid.
 */
function isRunning(info: LockInfo): boolean {
  if (procfs) {
    const now = processIdentity(info.pid);
    // A lock written before start times were recorded is trusted on its pid, as it was then.
    return now !== undefined && !now.zombie && (info.startTime === undefined || info.startTime === now.startTime);
  }
  try {
    process.kill(info.pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM'; // it exists, but belongs to another user
  }
}

/** Linux: the process's start time and whether it is a zombie; undefined if there is no such process (or no /proc). */
export function processIdentity(pid: number): { startTime: string; zombie: boolean } | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // Field 2, the command name, is in parentheses and may itself hold spaces and ')': fields 3.. follow the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { zombie: fields[0] === 'Z' || fields[0] === 'X', startTime: fields[19]! };
}
