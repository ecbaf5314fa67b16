import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { OrderlyError } from '../core/errors.js';

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
}

const procfs = existsSync('/proc/self/stat');

/** The lock's file name inside the data directory. */
export const LOCK_FILE = 'orderly.lock';

/** One process runs a data directory: `orderly run` holds `<dataDir>/orderly.lock` while it runs. */
export function readLock(dataDir: string): LockInfo | undefined {
  const file = join(dataDir, LOCK_FILE);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
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
  const running = readLock(dataDir);
  if (running && running.pid !== process.pid) {
    throw new OrderlyError(
      'FAILED_PRECONDITION',
      `the data directory ${dataDir} is in use by a running job (pid ${running.pid}); stop it first${running.metrics ? `, or read ${running.metrics}/status` : ''}`,
    );
  }
  mkdirSync(dataDir, { recursive: true });
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
    const error = e as NodeJS.ErrnoException;
    throw new OrderlyError(
      error.code === 'ENOSPC' ? 'RESOURCE_EXHAUSTED' : 'FAILED_PRECONDITION',
      `cannot write the lock file ${file} of the data directory ${dataDir}: ${error.message}`,
    );
  }
  return () => rmSync(file, { force: true });
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
