import { closeSync, fsyncSync, openSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

/** Makes a rename or a new file in `dir` survive a power loss (the directory entry itself is synced). */
export function syncDir(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Syncs a file's content to disk. */
export function syncFile(file: string): void {
  const fd = openSync(file, 'r+');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Moves `from` to `to` in one step (same file system) and makes the move durable. */
export function durableRename(from: string, to: string): void {
  renameSync(from, to);
  syncDir(dirname(to));
  if (dirname(from) !== dirname(to)) syncDir(dirname(from));
}

/**
 * Replaces `file` with `data` all at once: a reader (or a crash of the process) sees the old content or
 * the new, never a part. `sync: false` skips the fsyncs (a cache, which a power loss may lose).
 */
export function writeFileAtomic(file: string, data: string | Uint8Array, options: { sync?: boolean } = {}): void {
  const tmp = `${file}.tmp-${process.pid}`;
  writeFileSync(tmp, data);
  if (options.sync === false) {
    renameSync(tmp, file);
    return;
  }
  syncFile(tmp);
  durableRename(tmp, file);
}
