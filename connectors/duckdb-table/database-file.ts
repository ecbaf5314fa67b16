import type { DuckDBInstance } from '@duckdb/node-api';
import { statSync } from 'node:fs';
import { duckDbFile, duckDbHeader } from '../../src/duckdb/database.js';

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

/**
 * What is wrong with the database file, if anything: the path must still name the file `instance` opened
 * (else `moved`), and that file must start with a DuckDB header (read through the instance's own
 * descriptor, which keeps DuckDB's lock on the file: see duckDbHeader).
 */
export function databaseFileProblem(path: string, instance: DuckDBInstance): { problem: string; moved: boolean } | undefined {
  let stat;
  try {
    stat = statSync(path);
  } catch {
    return { problem: 'was deleted', moved: true };
  }
  const opened = duckDbFile(instance);
  if (opened && (stat.dev !== opened.dev || stat.ino !== opened.ino)) return { problem: 'was replaced by another file', moved: true };
  const header = duckDbHeader(instance, 12);
  return header.subarray(8, 12).equals(DUCKDB_MAGIC)
    ? undefined
    : { problem: 'has no DuckDB header (truncated or overwritten)', moved: false };
}
