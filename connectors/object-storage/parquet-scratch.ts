import { DuckDBInstance } from '@duckdb/node-api';
import { mkdir, rm } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { closeOffTheLoop } from '../../src/duckdb/close-off-the-loop.js';
import { duckDbSettings } from '../../src/duckdb/database.js';

/** The DuckDB instance the Parquet files of one data directory are encoded in; `release` once done with it. */
export interface ParquetScratch {
  readonly instance: Promise<DuckDBInstance>;
  release(): Promise<void>;
}

interface Shared {
  instance: Promise<DuckDBInstance>;
  users: number;
}

const shared = new Map<string, Shared>();
/** Per directory, the close of its last instance: a new one clears the directory only after it. */
const closing = new Map<string, Promise<void>>();

/**
 * Where DuckDB spills while it encodes a data directory's Parquet files: inside the directory, which the
 * job holds locked, so the next start in it owns what a killed process left there and clears it. Under the
 * system temp dir, named after the process id, every process killed while it had spilled (and every one
 * ended by process.exit, which destroys no instance) left a folder there that nothing would ever remove.
 */
export function parquetScratchDir(dataDir: string): string {
  return join(dataDir, 'object-storage', 'parquet.tmp');
}

/**
 * The Parquet scratch database of the data directory, shared by its exports so that they are encoded
 * within one memory limit (memory.duckdb) as before, and closed once the last of them released it:
 * DuckDB removes the spill folder it made when its instance closes.
 */
export function acquireParquetScratch(dataDir: string): ParquetScratch {
  const dir = parquetScratchDir(resolve(dataDir));
  let entry = shared.get(dir);
  if (!entry) {
    const created: Shared = { instance: open(dir), users: 0 };
    // One that could not be created is not handed out again: the next acquire tries anew.
    created.instance.catch(() => {
      if (shared.get(dir) === created) shared.delete(dir);
    });
    shared.set(dir, (entry = created));
  }
  entry.users++;
  const held = entry;
  let released = false;
  return {
    instance: held.instance,
    release: async () => {
      if (released) return;
      released = true;
      if (--held.users > 0) return;
      if (shared.get(dir) === held) shared.delete(dir);
      const closed = held.instance.then(close, () => undefined);
      closing.set(dir, closed);
      await closed;
      if (closing.get(dir) === closed) closing.delete(dir);
    },
  };
}

async function open(dir: string): Promise<DuckDBInstance> {
  await closing.get(dir);
  // What a killed process spilled there: nothing else uses the folder while this process holds the job.
  await rm(dir, { recursive: true, force: true });
  // DuckDB creates the folder only if it ever spills, but not the folders above it.
  await mkdir(dirname(dir), { recursive: true });
  return DuckDBInstance.create(':memory:', duckDbSettings('other', { temp_directory: dir, preserve_insertion_order: 'true' }));
}

/** Closes the instance with as little as possible on the event loop (closeOffTheLoop). */
async function close(instance: DuckDBInstance): Promise<void> {
  await closeOffTheLoop(() => instance.connect());
  instance.closeSync();
}
