import { accessSync, constants } from 'node:fs';
import { FailedPreconditionError } from '../core/errors.js';

/**
 * The data directory cannot be written by this user (its permissions, a read-only mount). Every command
 * writes there, a read-only one too: its lock file, and SQLite's shared-memory file beside the store (WAL
 * mode). Found before either is tried, whose own errors named a lock file or said only "unable to open
 * database file".
 */
export class DataDirUnwritableError extends FailedPreconditionError {
  constructor(
    readonly dataDir: string,
    cause: NodeJS.ErrnoException,
  ) {
    super(
      `the data directory ${dataDir} cannot be written by this user (${cause.code ?? cause.message}). Every orderly command ` +
        "writes there, a read-only one (status, audit, query) too: its lock file, and SQLite's shared-memory file (-shm) " +
        'beside the store. Nothing was changed. Let this user write the directory, run the command as its owner, or ' +
        'copy the directory somewhere writable (and check that the file system is not mounted read-only).',
    );
    this.name = 'DataDirUnwritableError';
  }
}

/** Refuses a data directory this user cannot write (DataDirUnwritableError). */
export function checkDataDirWritable(dataDir: string): void {
  try {
    accessSync(dataDir, constants.W_OK);
  } catch (e) {
    const error = e as NodeJS.ErrnoException;
    if (error.code === 'EACCES' || error.code === 'EPERM' || error.code === 'EROFS') throw new DataDirUnwritableError(dataDir, error);
    throw e;
  }
}
