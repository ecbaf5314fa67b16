import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { closeSync, mkdirSync, openSync, readdirSync, readSync, statSync } from 'node:fs';
import { basename, dirname, extname, resolve } from 'node:path';
import { closeOffTheLoop } from './close-off-the-loop.js';
import { duckDbSettings, type DuckDbUse } from './limits.js';
import { quoteIdent, quoteString } from './sql.js';

export { duckDbSettings, setDuckDbLimits, type DuckDbUse } from './limits.js';

/**
 * One DuckDB instance per database file per process (DuckDB allows a single writing process per file;
 * inside it, any number of connections). Writers and analytics queries share it, so queries can run
 * while the export writes (MVCC: a query sees committed rows).
 */
const instances = new Map<string, Promise<DuckDBInstance>>();

/** The file (device, inode) each instance opened: the path may come to name another file later. */
const openedFiles = new WeakMap<DuckDBInstance, { dev: number; ino: number }>();
/**
 * A descriptor of each instance's file, open as long as the instance is, to read the file's header
 * through. DuckDB locks its file with a POSIX record lock, which the kernel drops when the process closes
 * *any* descriptor of the file: opening and closing the path to check it would let another process
 * (a second worker, `orderly query`) open the database for writing at the same time.
 */
const headerFds = new WeakMap<DuckDBInstance, number>();

/**
 * Rows per row group of what Orderly writes (DuckDB's default: 122,880). Each automatic checkpoint
 * compresses the table's last, growing row group again in memory outside memory_limit: at 1 KB rows the
 * default made a 1M-message DuckDB export drain peak ~100 MiB higher (bench/memory.ts; a DuckDB-only
 * append loop ~180 MiB) and single commits take seconds. Not stored in the file: it applies to what this
 * process writes, to new files and to files written before alike (their existing row groups stay as they are).
 */
export const ROW_GROUP_SIZE = 16_384;

/**
 * A 64 MB WAL before each automatic checkpoint (DuckDB's default is 16 MB): at the default, checkpoints
 * took ~40% of the export's commit time (bench/duckdb-export.ts).
 */
export const CHECKPOINT_THRESHOLD = '64MB';

/** The catalog each instance's database file is attached as (every connection USEs it). */
const catalogs = new WeakMap<DuckDBInstance, string>();

/** DuckDB's own message names the file it read, not which database could not be opened. */
export function cannotOpen(file: string, e: unknown): Error {
  return new Error(`cannot open DuckDB database ${file}: ${(e as Error).message}`, { cause: e });
}

/**
 * The instance of the database file at `path` for this process. DuckDB takes a row group size only as an
 * ATTACH option, so the instance is an in-memory one with the file attached, under the name DuckDB gives
 * a file it opens directly (its base name), unless that is the in-memory database's own name: queries
 * naming the catalog keep working. Connect through connectDuckDb / connectToDuckDb, which USE it.
 */
export function openDuckDb(path: string, use: DuckDbUse = 'tables'): Promise<DuckDBInstance> {
  const file = resolve(path);
  // Held here for the life of the process: DuckDB's own instance cache does not keep an instance alive,
  // and a second instance on the same file in one process hangs or corrupts it.
  let instance = instances.get(file);
  if (!instance) {
    mkdirSync(dirname(file), { recursive: true });
    instance = attachDuckDb(file, use).then(
      (created) => {
        const { dev, ino } = statSync(file);
        openedFiles.set(created, { dev, ino });
        headerFds.set(created, openSync(file, 'r'));
        return created;
      },
      (e: unknown) => {
        instances.delete(file);
        throw cannotOpen(file, e);
      },
    );
    instances.set(file, instance);
  }
  return instance;
}

async function attachDuckDb(file: string, use: DuckDbUse): Promise<DuckDBInstance> {
  const stem = basename(file, extname(file));
  const catalog = ['memory', 'system', 'temp'].includes(stem.toLowerCase()) ? `${stem}_db` : stem;
  // Spills go next to the file, as when DuckDB opens it directly (an in-memory database's default is ./.tmp).
  const instance = await DuckDBInstance.create(
    ':memory:',
    duckDbSettings(use, { checkpoint_threshold: CHECKPOINT_THRESHOLD, temp_directory: `${file}.tmp` }),
  );
  try {
    const connection = await instance.connect();
    try {
      await connection.run(`ATTACH ${quoteString(file)} AS ${quoteIdent(catalog)} (ROW_GROUP_SIZE ${ROW_GROUP_SIZE})`);
    } finally {
      connection.closeSync();
    }
  } catch (e) {
    instance.closeSync();
    throw e;
  }
  catalogs.set(instance, catalog);
  return instance;
}

/**
 * Closes the database file (all its connections must be closed); used when a job stops. Its WAL is
 * checkpointed first, off the event loop (closeOffTheLoop).
 */
export async function closeDuckDb(path: string): Promise<void> {
  const file = resolve(path);
  const instance = instances.get(file);
  if (!instance) return;
  instances.delete(file);
  const opened = await instance;
  await closeOffTheLoop(() => connectToDuckDb(opened), { checkpoint: true });
  closeInstance(opened);
}

/**
 * Whether this process has the file at `path` open (Linux: its descriptors in /proc/self/fd); true where
 * that cannot be told, and for no file there, so that a caller then does what it did before it asked.
 */
function openInThisProcess(path: string): boolean {
  let target;
  let fds;
  try {
    target = statSync(path);
    fds = readdirSync('/proc/self/fd');
  } catch {
    return true;
  }
  return fds.some((fd) => {
    try {
      const open = statSync(`/proc/self/fd/${fd}`);
      return open.dev === target.dev && open.ino === target.ino;
    } catch {
      return false;
    }
  });
}

/** Closes the instance first: closing its header descriptor while DuckDB still holds the file would drop the lock. */
function closeInstance(instance: DuckDBInstance): void {
  instance.closeSync();
  const fd = headerFds.get(instance);
  headerFds.delete(instance);
  if (fd !== undefined) closeSync(fd);
}

/** The first `length` bytes of the file the instance opened (read through its own descriptor: see headerFds). */
export function duckDbHeader(instance: DuckDBInstance, length: number): Buffer {
  const header = Buffer.alloc(length);
  const fd = headerFds.get(instance);
  if (fd !== undefined) readSync(fd, header, 0, length, 0);
  return header;
}

/** The file an instance opened (device and inode), to check that its path still names that file. */
export function duckDbFile(instance: DuckDBInstance): { dev: number; ino: number } | undefined {
  return openedFiles.get(instance);
}

/**
 * Closes `instance` and forgets it, if it is still this process's instance for `path`, so the next open
 * reads the file afresh (after the file was deleted or replaced under it). Another instance opened since
 * is left alone: closing that one would let two instances meet on one file.
 *
 * `moved`: the path no longer names the instance's file. DuckDB checkpoints a database as it closes it,
 * then removes the WAL *at the path*: by now that may be the WAL of the file another process created
 * there (a fleet's standby that took the path over), whose commits not yet checkpointed would go with it
 * — acked rows lost once that process stops without a checkpoint (a kill). Unless the WAL there is the
 * instance's own (a backup renamed into place beside it: removed as before, or it would be replayed into
 * the backup), the checkpoint is skipped: it would only write to the file that is gone.
 */
export async function discardDuckDb(path: string, instance: DuckDBInstance, { moved = false } = {}): Promise<void> {
  const file = resolve(path);
  const cached = instances.get(file);
  if (!cached || (await cached.catch(() => undefined)) !== instance) return;
  instances.delete(file);
  if (moved && !openInThisProcess(`${file}.wal`)) {
    const connection = await instance.connect();
    try {
      await connection.run('PRAGMA disable_checkpoint_on_shutdown');
    } finally {
      connection.closeSync();
    }
  }
  closeInstance(instance);
}

/** `use`: what the instance is opened for, if this opens it (an open instance keeps its limits): a table export's by default. */
export async function connectDuckDb(path: string, use: DuckDbUse = 'tables'): Promise<DuckDBConnection> {
  return connectToDuckDb(await openDuckDb(path, use));
}

/** A connection to an instance openDuckDb returned, using its database file (a bare connect() would use the in-memory one). */
export async function connectToDuckDb(instance: DuckDBInstance): Promise<DuckDBConnection> {
  const connection = await instance.connect();
  const catalog = catalogs.get(instance);
  try {
    if (catalog !== undefined) await connection.run(`USE ${quoteIdent(catalog)}`);
  } catch (e) {
    connection.closeSync();
    throw e;
  }
  return connection;
}

/**
 * Runs a read query on its own connection; rows as plain objects (BIGINTs as bigint). `use`: as
 * connectDuckDb (a database file is a table export's unless said otherwise).
 */
export async function queryDuckDb(path: string, sql: string, use: DuckDbUse = 'tables'): Promise<Record<string, unknown>[]> {
  const connection = await connectDuckDb(path, use);
  try {
    return (await connection.runAndReadAll(sql)).getRowObjects();
  } finally {
    connection.closeSync();
  }
}

/**
 * The process holding the database file, when `error` is DuckDB's refusal to open a file another process
 * has open for writing ("Conflicting lock is held in ... (PID n)"); undefined for any other error.
 */
export function duckDbLockHolder(error: unknown): string | undefined {
  const message = (error as Error).message ?? String(error);
  if (!/Could not set lock on file/i.test(message)) return undefined;
  return /\(PID (\d+)\)/.exec(message)?.[1] ?? 'another process';
}
