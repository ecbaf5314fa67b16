import { open, readFile, truncate } from 'node:fs/promises';

/** One exported message, one line of the file. `uid` is the subscription's: a subscription created again under the same name writes lines of its own. */
export interface Line {
  uid: string;
  id: string;
  /** The ordering key ('' for none) and the message's place in it (from 1). */
  key: string;
  sequence: number;
  data: string;
}

/** Each field's SQL type, for reading the file: DuckDB's guess made a `data` of "2026-12-06" a DATE. */
export const LINE_COLUMNS: Record<keyof Line, string> = {
  uid: 'VARCHAR',
  id: 'VARCHAR',
  key: 'VARCHAR',
  sequence: 'BIGINT',
  data: 'VARCHAR',
};

/**
 * The file's complete lines. A crash during an append can leave a torn last line (no newline): that
 * append never returned, so its messages were never reported written and come again; with `repair` the
 * torn part is cut off, so the next append starts on a line of its own.
 */
export async function readLines(path: string, options: { repair?: boolean } = {}): Promise<Line[]> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw e;
  }
  const complete = text.lastIndexOf('\n') + 1;
  if (options.repair && complete < text.length) await truncate(path, Buffer.byteLength(text.slice(0, complete)));
  return text
    .slice(0, complete)
    .split('\n')
    .filter((line) => line)
    .map((line) => JSON.parse(line) as Line);
}

/** Appends the lines and syncs the file: when this returns they are durable. */
export async function appendLines(path: string, lines: Line[]): Promise<void> {
  const file = await open(path, 'a');
  try {
    await file.appendFile(lines.map((l) => JSON.stringify(l) + '\n').join(''));
    await file.sync();
  } finally {
    await file.close();
  }
}
