import { open, type FileHandle } from 'node:fs/promises';

/** Records are gathered into a chunk of this size before they reach the file: few, large writes. */
const CHUNK_BYTES = 1024 * 1024;
const NO_CHUNK = Buffer.alloc(0);

/**
 * Writes a record into `chunk` at `at` (at most the size it was appended with) and returns where it ends.
 * A plain function of the record rather than a closure per record: a text export's appends are mostly a
 * copy, and a closure each would be garbage of the same order.
 */
export type FillRecord<T> = (chunk: Buffer, at: number, record: T) => number;

/**
 * A local file written in records copied into a chunk that is written when full and then reused. A new
 * chunk per write (Buffer.concat) lived until the file write finished, long enough to be promoted, so
 * every MiB exported stayed in memory as garbage until V8's next full collection (tens of MiB at a time
 * while draining a backlog, bench/memory.ts). Two chunks take turns: one fills while the other is
 * written, so an append waits for the disk only when both are full. With one, the export's writes stood
 * still for every chunk written (~3.5 ms per MiB, a sixth of a 1M-message drain).
 */
export class ChunkedFile {
  private chunk: Buffer = Buffer.allocUnsafe(CHUNK_BYTES);
  /** The other chunk, once the file outgrows one (a small file never needs it). */
  private spare: Buffer | undefined;
  private used = 0;
  /** The other chunk's write while it runs: one write at a time, in file order. */
  private writing: Promise<void> | undefined;
  /** A background write failed: the next append or close throws it (the file is then discarded). */
  private failure: { error: unknown } | undefined;

  private constructor(private readonly handle: FileHandle) {}

  static async open(path: string): Promise<ChunkedFile> {
    return new ChunkedFile(await open(path, 'w'));
  }

  /** An append that waits for the disk: the next one must wait for it, or records would interleave. */
  private waiting = false;

  /**
   * Returns a promise only when the record waits for the disk (both chunks full, or a record larger than
   * one); the caller awaits it before appending again.
   */
  append<T>(size: number, record: T, fill: FillRecord<T>): void | Promise<void> {
    this.raise();
    if (this.waiting) throw new Error('a record was appended while the previous one waited for the disk');
    if (this.used + size <= CHUNK_BYTES) {
      this.used = fill(this.chunk, this.used, record);
      return;
    }
    if (size <= CHUNK_BYTES && !this.writing) {
      this.swap();
      this.used = fill(this.chunk, 0, record);
      return;
    }
    this.waiting = true;
    return this.appendAfterWrite(size, record, fill).finally(() => {
      this.waiting = false;
    });
  }

  private async appendAfterWrite<T>(size: number, record: T, fill: FillRecord<T>): Promise<void> {
    await this.writing;
    this.raise();
    if (size <= CHUNK_BYTES) {
      this.swap();
      this.used = fill(this.chunk, 0, record);
      return;
    }
    // Larger than a chunk: what the chunk holds, then the record in a buffer of its own.
    await this.writeAll(this.chunk, this.used);
    this.used = 0;
    const own = Buffer.allocUnsafe(size);
    await this.writeAll(own, fill(own, 0, record));
  }

  async close(): Promise<void> {
    try {
      await this.writing;
      this.raise();
      if (this.used) await this.writeAll(this.chunk, this.used);
    } finally {
      // A sealed file waits in line for its upload: its chunks are of no more use.
      this.chunk = NO_CHUNK;
      this.spare = undefined;
      this.used = 0;
      await this.handle.close();
    }
  }

  private raise(): void {
    if (this.failure) throw this.failure.error;
  }

  private async writeAll(buffer: Buffer, length: number): Promise<void> {
    for (let written = 0; written < length;) written += (await this.handle.write(buffer, written, length - written)).bytesWritten;
  }

  /** Starts writing the full chunk and goes on in the other one; only once the previous write has finished. */
  private swap(): void {
    const full = this.chunk;
    const length = this.used;
    this.chunk = this.spare ?? Buffer.allocUnsafe(CHUNK_BYTES);
    this.spare = full;
    this.used = 0;
    this.writing = this.writeAll(full, length).then(
      () => {
        this.writing = undefined;
      },
      (error: unknown) => {
        this.failure = { error };
        this.writing = undefined;
      },
    );
  }
}
