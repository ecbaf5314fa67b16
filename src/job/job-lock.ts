import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { OrderlyError } from '../core/errors.js';

export interface LockInfo {
  pid: number;
  metrics?: string;
  /** host:port of the running job's Pub/Sub endpoint, if it serves one. */
  endpoint?: string;
}

/** One process runs a data directory: `orderly run` holds `<dataDir>/orderly.lock` while it runs. */
export function readLock(dataDir: string): LockInfo | undefined {
  const file = join(dataDir, 'orderly.lock');
  if (!existsSync(file)) return undefined;
  const info = JSON.parse(readFileSync(file, 'utf8')) as LockInfo;
  try {
    process.kill(info.pid, 0);
    return info;
  } catch {
    return undefined; // a stale lock of a process that died
  }
}

export function acquireLock(dataDir: string, info: Omit<LockInfo, 'pid'> = {}): () => void {
  const running = readLock(dataDir);
  if (running && running.pid !== process.pid) {
    throw new OrderlyError('FAILED_PRECONDITION', `the data directory ${dataDir} is in use by a running job (pid ${running.pid}); stop it first${running.metrics ? `, or read ${running.metrics}/status` : ''}`);
  }
  mkdirSync(dataDir, { recursive: true });
  const file = join(dataDir, 'orderly.lock');
  writeFileSync(file, JSON.stringify({ pid: process.pid, ...info }));
  return () => rmSync(file, { force: true });
}
