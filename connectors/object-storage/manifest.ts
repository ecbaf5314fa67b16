import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';

/** One committed object: what it holds, per ordering key. */
export interface ManifestObject {
  object: string;
  bucket: string;
  format: string;
  /** When the file was opened (the time in its name). */
  createdAt: string;
  committedAt: string;
  records: number;
  bytes: number;
  /** Per ordering key: first and last sequence and the record count, in file order. */
  keys: Record<string, { first: number; last: number; count: number }>;
  /** Message ids of records without an ordering key. */
  unkeyed: string[];
}

type Line = { type: 'pending'; object: string } | { type: 'discarded'; object: string } | ({ type: 'committed' } & ManifestObject);

/**
 * The durable list of objects an object-storage subscription has committed, one JSON line per event,
 * each fsynced before the call returns. "pending" is written before an upload starts and "committed"
 * after it completed and before any of its messages is acked, so after a crash an object that was
 * uploaded but never committed is known (and removed), never silently counted.
 */
export class Manifest {
  private readonly fd: number;
  private readonly objects = new Map<string, ManifestObject>();
  private readonly pending = new Set<string>();

  constructor(readonly path: string) {
    mkdirSync(dirname(path), { recursive: true });
    if (existsSync(path)) {
      const lines = readFileSync(path, 'utf8').split('\n');
      lines.forEach((text, i) => {
        if (!text) return;
        let line: Line;
        try {
          line = JSON.parse(text);
        } catch {
          // A torn last line is what a crash mid-append leaves; anything earlier is corruption.
          if (i === lines.length - 1 || (i === lines.length - 2 && lines[lines.length - 1] === '')) return;
          throw new Error(`manifest ${path} is corrupt at line ${i + 1}; it was not modified`);
        }
        if (line.type === 'pending') this.pending.add(line.object);
        else {
          this.pending.delete(line.object);
          if (line.type === 'committed') {
            const { type: _type, ...entry } = line;
            this.objects.set(line.object, entry);
          }
        }
      });
    }
    this.fd = openSync(path, 'a');
  }

  private append(line: Line): void {
    writeSync(this.fd, JSON.stringify(line) + '\n');
    fsyncSync(this.fd);
  }

  markPending(object: string): void {
    this.pending.add(object);
    this.append({ type: 'pending', object });
  }

  commit(entry: ManifestObject): void {
    this.pending.delete(entry.object);
    this.objects.set(entry.object, entry);
    this.append({ type: 'committed', ...entry });
  }

  discard(object: string): void {
    this.pending.delete(object);
    this.append({ type: 'discarded', object });
  }

  /** Uploads that started and never committed (a crash or a failed upload). */
  unfinished(): string[] {
    return [...this.pending];
  }

  /** Committed objects in name order (the order their file names put them in). */
  committed(): ManifestObject[] {
    return [...this.objects.values()].sort((a, b) => (a.object < b.object ? -1 : a.object > b.object ? 1 : 0));
  }

  close(): void {
    closeSync(this.fd);
  }
}
