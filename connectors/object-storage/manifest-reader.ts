import { closeSync, existsSync, openSync, readSync } from 'node:fs';
import { parseLine, type ManifestObject } from './manifest.js';

/** One committed object as a reader lists it: what ordering and the query view need, and where its entry is. */
export type CommittedRef = Omit<ManifestObject, 'keys' | 'unkeyed' | 'ids' | 'messages'> & {
  /** Byte offset and length of its entry's line in the manifest file, to read the whole entry when it is its turn. */
  at: number;
  length: number;
};

/** Bytes read from the file at a time while it is scanned. */
const CHUNK = 1 << 20;

/**
 * A read-only view of a subscription's manifest for the tools (`orderly audit`, `orderly query`) that holds
 * one entry at a time: opening scans the file line by line and keeps, per committed object, only its name,
 * times, counts and where its line is (about 300 bytes an object); `read` brings back one whole entry (its
 * per-key ranges) when the caller comes to it. Reading every entry at once (Manifest) held the whole
 * history: 200 objects of a 1M-message export were 28 MB of JSON and hundreds of MB of heap.
 * It reads the file as Manifest does: a torn last line (an append a crash cut short) does not count, a
 * line before it that is not a complete entry is ManifestCorruptError, and an object committed twice is
 * its last entry.
 */
export class ManifestReader {
  private readonly fd?: number;
  private readonly refs = new Map<string, CommittedRef>();

  constructor(readonly path: string) {
    if (!existsSync(path)) return;
    this.fd = openSync(path, 'r');
    try {
      this.scan(this.fd);
    } catch (e) {
      closeSync(this.fd);
      throw e;
    }
  }

  private scan(fd: number): void {
    let carry = Buffer.alloc(0);
    /** File offset of carry's first byte. */
    let carryAt = 0;
    let lineNo = 0;
    const chunk = Buffer.alloc(CHUNK);
    for (let read: number; (read = readSync(fd, chunk, 0, CHUNK, carryAt + carry.length)) > 0;) {
      const data = carry.length ? Buffer.concat([carry, chunk.subarray(0, read)]) : chunk.subarray(0, read);
      let start = 0;
      for (let nl: number; (nl = data.indexOf(0x0a, start)) >= 0; start = nl + 1) {
        lineNo++;
        if (nl > start) this.take(data.subarray(start, nl), carryAt + start, lineNo);
      }
      // The unfinished line is copied: chunk is read into again.
      carry = Buffer.from(data.subarray(start));
      carryAt += start;
    }
  }

  private take(bytes: Buffer, at: number, lineNo: number): void {
    const line = parseLine(bytes.toString('utf8'), this.path, lineNo);
    if (line.type !== 'committed') return;
    const { object, bucket, format, createdAt, counter, committedAt, records, bytes: size, worker } = line;
    this.refs.delete(object);
    this.refs.set(object, {
      object,
      bucket,
      format,
      createdAt,
      counter,
      committedAt,
      records,
      bytes: size,
      worker,
      at,
      length: bytes.length,
    });
  }

  /** The committed objects, in name order (the order their file names put them in). */
  committed(): CommittedRef[] {
    return [...this.refs.values()].sort((a, b) => (a.object < b.object ? -1 : a.object > b.object ? 1 : 0));
  }

  /** The whole entry of one committed object. */
  read(ref: CommittedRef): ManifestObject {
    const bytes = Buffer.alloc(ref.length);
    for (let got = 0; got < ref.length;) {
      const n = readSync(this.fd!, bytes, got, ref.length - got, ref.at + got);
      if (!n) throw new Error(`manifest ${this.path} was cut short while it was read (at byte ${ref.at + got})`);
      got += n;
    }
    const { type: _type, ...entry } = parseLine(bytes.toString('utf8'), this.path, 0) as ManifestObject & { type: string };
    return entry;
  }

  close(): void {
    if (this.fd !== undefined) closeSync(this.fd);
  }
}
