import { closeSync, openSync, readSync, statSync } from 'node:fs';

/**
 * The database file is not the one the writer opened any more (deleted, replaced, truncated, header
 * overwritten). DuckDB does not notice while it runs, so rows committed now would be acked into a file
 * that is gone: the writer stops reporting anything written until the file is whole again.
 */
export class DuckDbFileError extends Error {
  constructor(file: string, problem: string) {
    super(
      `DuckDB database ${file} ${problem}; nothing more is acked until it is whole again. Restore it from a backup (or move it ` +
        'aside to start a new file), see docs/connectors.md "When the DuckDB file is damaged"',
    );
    this.name = 'DuckDbFileError';
  }
}

/** A DuckDB file begins with a 8-byte checksum, then this. */
const DUCKDB_MAGIC = Buffer.from('DUCK');

/** What is wrong with the database file, if anything; `opened` is the file the instance opened. */
export function databaseFileProblem(path: string, opened: { dev: number; ino: number } | undefined): string | undefined {
  let stat;
  try {
    stat = statSync(path);
  } catch {
    return 'was deleted';
  }
  if (opened && (stat.dev !== opened.dev || stat.ino !== opened.ino)) return 'was replaced by another file';
  const header = Buffer.alloc(12);
  const fd = openSync(path, 'r');
  try {
    readSync(fd, header, 0, header.length, 0);
  } finally {
    closeSync(fd);
  }
  return header.subarray(8, 12).equals(DUCKDB_MAGIC) ? undefined : 'has no DuckDB header (truncated or overwritten)';
}

/** DuckDB's refusal to open a file another process has open for writing ("Conflicting lock is held in ... (PID n)"). */
export function lockHolder(error: unknown): string | undefined {
  const message = (error as Error).message ?? String(error);
  if (!/Could not set lock on file/i.test(message)) return undefined;
  return /\(PID (\d+)\)/.exec(message)?.[1] ?? 'another process';
}
