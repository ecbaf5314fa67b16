import {
  closeSync,
  constants,
  existsSync,
  fsync,
  fsyncSync,
  ftruncate,
  ftruncateSync,
  mkdirSync,
  openSync,
  readFileSync,
  write,
} from 'node:fs';
import { dirname } from 'node:path';
import { promisify } from 'node:util';

const writeAt = promisify(write);
const fsyncAsync = promisify(fsync);
const ftruncateAsync = promisify(ftruncate);

/** One committed object: what it holds, per ordering key. */
export interface ManifestObject {
  object: string;
  bucket: string;
  format: string;
  /** When the file was opened (the time in its name). */
  createdAt: string;
  /** The writer's file counter in the object's name (objects named before counters have none). */
  counter?: number;
  committedAt: string;
  records: number;
  bytes: number;
  /** Per ordering key: first and last sequence and the record count, in file order. */
  keys: Record<string, { first: number; last: number; count: number }>;
  /** Message ids of records without an ordering key. */
  unkeyed: string[];
  /** Message ids of keyed records recognised by id (an unordered subscription; see RedeliveryMark). */
  ids?: string[];
  /**
   * A fleet's object (the manifest in the bucket): every record's message id, ordering key and publish
   * time (ms), in file order — what the manifest view and the audit read, as no per-key sequences exist.
   */
  messages?: [id: string, key: string, publishMs: number][];
  /** The worker that wrote it (a fleet's object). */
  worker?: string;
}

/**
 * An upload that started: its bucket is the one the subscription wrote to then, which a job file edited
 * before the next start may have changed (lines written before it was recorded have none).
 */
export interface PendingUpload {
  object: string;
  bucket?: string;
}

export type Line =
  | ({ type: 'pending'; counter?: number } & PendingUpload)
  | { type: 'discarded'; object: string }
  | ({ type: 'committed' } & ManifestObject);

/** A manifest line that is not a complete entry, before the last line: damage, never repaired silently. */
export class ManifestCorruptError extends Error {
  constructor(
    readonly path: string,
    readonly line: number,
  ) {
    super(
      `manifest ${path} is corrupt at line ${line} (not a complete entry); it was not modified. ` +
        'Repair or remove that line by hand (or restore the file), then the export resumes by itself.',
    );
    this.name = 'ManifestCorruptError';
  }
}

/** Every entry begins with this; inside an entry it can only appear escaped, so it marks where one starts. */
const ENTRY_START = '{"type":"';

/**
 * The durable list of objects an object-storage subscription has committed, one JSON line per event,
 * appended as a write-ahead log is: each line written whole and fsynced before the call resolves, and an
 * append that fails is cut back off. Writes and fsyncs run off the main thread; lines appended while one
 * is being written go together in the next write and fsync (group commit). "pending" is written before an upload starts and "committed" after
 * it completed and before any of its messages is acked, so after a crash an object that was uploaded but
 * never committed is known (and removed), never silently counted.
 *
 * A crash mid-append leaves a torn last line: opened for writing, the manifest cuts the file back to its
 * last complete line (an event whose append never returned did not happen). Anything wrong before the
 * last line is corruption: ManifestCorruptError names the file and line, and nothing is changed.
 *
 * Opened for writing, it keeps in memory only what the writer needs: the objects committed when it was
 * opened (`committed()`), not every object committed since (each holds its keys' ranges, and a long
 * export commits thousands).
 */
export class Manifest {
  private readonly fd: number;
  /** Lines waiting for the next write, and the write in progress. */
  private queued: { line: Line; resolve(): void; reject(e: unknown): void }[] = [];
  private writing?: Promise<void>;
  /** Set once the lines of the file were replayed: later committed entries are not kept (see above). */
  private opened = false;
  /** Bytes of complete lines: where the next line goes. */
  private size = 0;
  /** Set when a failed append could not be cut back off; every later append refuses. */
  private broken?: Error;
  private readonly objects = new Map<string, ManifestObject>();
  private readonly pending = new Map<string, PendingUpload>();
  private highestCounter = 0;
  /** Bytes of a torn last line cut off when the manifest was opened (0 if none). */
  readonly repairedBytes: number = 0;

  /** Opens for writing (creating the file). Readers that must not change it read through ManifestReader. */
  constructor(readonly path: string) {
    const text = existsSync(path) ? readFileSync(path) : Buffer.alloc(0);
    const lastNewline = text.lastIndexOf(0x0a);
    const complete = lastNewline + 1;
    text
      .subarray(0, complete)
      .toString('utf8')
      .split('\n')
      .forEach((line, i) => line && this.replay(parseLine(line, path, i + 1)));
    this.size = complete;
    this.opened = true;
    mkdirSync(dirname(path), { recursive: true });
    this.fd = openSync(path, constants.O_RDWR | constants.O_CREAT);
    if (text.length > complete) {
      ftruncateSync(this.fd, complete);
      fsyncSync(this.fd);
      this.repairedBytes = text.length - complete;
    }
  }

  private replay(line: Line): void {
    if ('counter' in line && line.counter !== undefined) this.highestCounter = Math.max(this.highestCounter, line.counter);
    if (line.type === 'pending') {
      this.pending.set(line.object, { object: line.object, bucket: line.bucket });
      return;
    }
    this.pending.delete(line.object);
    if (line.type === 'committed' && !this.opened) {
      const { type: _type, ...entry } = line;
      this.objects.set(line.object, entry);
    }
  }

  private append(line: Line): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queued.push({ line, resolve, reject });
      this.writing ??= this.writeQueued(this.fd);
    });
  }

  /** Writes the queued lines, as many as queued up meanwhile at a time, each group with one fsync. */
  private async writeQueued(fd: number): Promise<void> {
    for (;;) {
      const group = this.queued.splice(0);
      if (!group.length) {
        // Cleared before any resolved caller runs, so its next append starts a new write.
        this.writing = undefined;
        return;
      }
      try {
        if (this.broken) throw this.broken;
        const data = Buffer.from(group.map((g) => JSON.stringify(g.line) + '\n').join(''));
        let written = 0;
        while (written < data.length)
          written += (await writeAt(fd, data, written, data.length - written, this.size + written)).bytesWritten;
        await fsyncAsync(fd);
        this.size += data.length;
      } catch (e) {
        if (e !== this.broken) await this.cutBack(fd, e);
        for (const g of group) g.reject(e);
        continue;
      }
      for (const g of group) {
        this.replay(g.line);
        g.resolve();
      }
    }
  }

  /** A failed write is cut back off; if that fails too, every later append refuses. */
  private async cutBack(fd: number, e: unknown): Promise<void> {
    try {
      await ftruncateAsync(fd, this.size);
      await fsyncAsync(fd);
    } catch (cut) {
      this.broken = new Error(
        `manifest ${this.path}: an append failed (${(e as Error).message}) and could not be cut back off (${(cut as Error).message})`,
      );
    }
  }

  markPending(object: string, counter?: number, bucket?: string): Promise<void> {
    return this.append({ type: 'pending', object, counter, bucket });
  }

  commit(entry: ManifestObject): Promise<void> {
    return this.append({ type: 'committed', ...entry });
  }

  discard(object: string): Promise<void> {
    return this.append({ type: 'discarded', object });
  }

  /** Uploads that started and never committed (a crash or a failed upload). */
  unfinished(): PendingUpload[] {
    return [...this.pending.values()];
  }

  /** The objects committed when the manifest was opened, in name order (the order their file names put them in). */
  committed(): ManifestObject[] {
    return [...this.objects.values()].sort((a, b) => (a.object < b.object ? -1 : a.object > b.object ? 1 : 0));
  }

  /**
   * committed(), once: the manifest forgets them. A writer reads them at open only; kept, they held every
   * key range the subscription had exported for as long as it ran (56 MB of heap for a million 1 KB messages over 10,000 keys).
   */
  takeCommitted(): ManifestObject[] {
    const objects = this.committed();
    this.objects.clear();
    return objects;
  }

  /** The highest file counter any object of this manifest was named with (0 if none). */
  lastCounter(): number {
    return this.highestCounter;
  }

  /** Closes the file; every append must have settled (been awaited) before. */
  close(): void {
    closeSync(this.fd);
  }
}

/**
 * One complete line (its number, from 1, names it in an error). Versions before the torn-tail repair appended after a torn line, leaving a fragment
 * followed by a whole entry on one line: that entry is read (the fragment is an append that never
 * returned). Anything else that does not parse is corruption.
 */
export function parseLine(text: string, path: string, line: number): Line {
  for (const start of [0, text.lastIndexOf(ENTRY_START)]) {
    if (start < 0) continue;
    try {
      const parsed = JSON.parse(text.slice(start)) as Line;
      if (parsed && typeof parsed.object === 'string' && ['pending', 'committed', 'discarded'].includes(parsed.type)) return parsed;
    } catch {
      // tried below, or reported
    }
  }
  throw new ManifestCorruptError(path, line);
}
