import { GetObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import type { AuditResult, ExportTarget } from '../../src/connector/capabilities.js';
import type { ObjectStorageConfig, OutputFormat } from './config.js';
import type { ManifestObject } from './manifest.js';
import { ManifestReader } from './manifest-reader.js';
import { manifestPath } from './object-writer.js';
import { readRecords, type ExportedRecord } from './record-format.js';
import { createS3Client, s3Connection } from './s3-client.js';
import { SequenceRanges } from './sequence-ranges.js';

export interface AuditFinding {
  count: number;
  examples: string[];
}

export interface AuditReport {
  objects: number;
  records: number;
  keys: number;
  /**
   * Per key, sequence numbers between the first and last seen that no object holds; messages without an
   * ordering key that the manifest lists and no object holds.
   */
  missing: AuditFinding;
  /** (key, sequence) pairs held more than once, and repeated unkeyed message ids. */
  duplicates: AuditFinding;
  /** Keys whose records inside one object are not in increasing sequence order. */
  outOfOrderInFile: AuditFinding;
  /**
   * Keys for which an object named earlier holds a later sequence than an object named later. Names order
   * by their datetime, then (within one second) by the file counter; objects named within one second
   * before counters existed are not ordered by their names.
   */
  skewedKeys: AuditFinding;
  /**
   * Manifest objects missing from the bucket, not readable in their format, or holding other records than
   * their entry lists (a different count; where records carry metadata, other keys, sequences or ids).
   */
  objectErrors: AuditFinding;
  /** Whether records carry ordering_key/sequence (avro/parquet with writeMetadata); else the manifest ranges are used. */
  recordLevel: boolean;
}

const EXAMPLES = 5;
const finding = (): AuditFinding => ({ count: 0, examples: [] });
/** Counts one problem, keeping the first few as examples. */
export const note = (f: AuditFinding, example: string) => {
  f.count++;
  if (f.examples.length < EXAMPLES) f.examples.push(example);
};

/** A report with nothing found yet. */
export function emptyReport(recordLevel: boolean): AuditReport {
  return {
    objects: 0,
    records: 0,
    keys: 0,
    missing: finding(),
    duplicates: finding(),
    outOfOrderInFile: finding(),
    skewedKeys: finding(),
    objectErrors: finding(),
    recordLevel,
  };
}

/**
 * An object the manifest lists, read back from the bucket; undefined when the bucket does not have it (a
 * finding of the audit). Any other failure — the bucket unreachable, access denied — leaves the audit
 * unable to tell, so it throws rather than count the object as lost.
 */
export async function fetchForAudit(s3: S3Client, entry: ManifestObject): Promise<Buffer | undefined> {
  try {
    const res = await s3.send(new GetObjectCommand({ Bucket: entry.bucket, Key: entry.object }));
    return Buffer.from(await res.Body!.transformToByteArray());
  } catch (e) {
    if ((e as Error).name === 'NoSuchKey') return undefined;
    throw new Error(`cannot read ${entry.object} from bucket ${entry.bucket}: ${(e as Error).message}`, { cause: e });
  }
}

/**
 * An object read back for an audit, against its manifest entry. Records are decoded where they can be
 * told apart; text lines cannot (a payload may hold a newline), and an object of a format the subscription
 * had before would need settings no longer known. Those are checked by their size, and the manifest's
 * count stands for theirs. An object that does not decode (torn, overwritten) holds no record the audit
 * can count: `count` 0, `unreadable`.
 */
export async function readObjectForAudit(
  body: Buffer,
  entry: ManifestObject,
  format: OutputFormat,
): Promise<{ records?: ExportedRecord[]; count: number; problem?: string; unreadable?: boolean }> {
  if (entry.format !== format.kind || format.kind === 'text') {
    const problem = body.length === entry.bytes ? undefined : `${entry.object}: ${body.length} bytes, manifest says ${entry.bytes}`;
    return { count: entry.records, problem };
  }
  let records: ExportedRecord[];
  try {
    records = await readRecords(body, format);
  } catch (e) {
    return { count: 0, problem: `${entry.object}: not a readable ${format.kind} file (${(e as Error).message})`, unreadable: true };
  }
  const problem =
    records.length === entry.records ? undefined : `${entry.object}: ${records.length} records, manifest says ${entry.records}`;
  return { records, count: records.length, problem };
}

/**
 * Where an object's records (per key, its sequences in file order; its unkeyed message ids) differ from
 * what its manifest entry lists: records forged or replaced, or objects swapped, even with equal counts.
 */
function entryMismatch(entry: ManifestObject, inFile: Map<string, FileSeqs>, unkeyedIds: string[]): string | undefined {
  for (const [key, seqs] of inFile) {
    const listed = Object.hasOwn(entry.keys, key) ? entry.keys[key] : undefined;
    const held = `${seqs.first}..${seqs.last} (${seqs.count} records)`;
    if (!listed) return `${entry.object}: holds key ${key} sequences ${held}, which its manifest entry does not list`;
    if (listed.first !== seqs.first || listed.last !== seqs.last || listed.count !== seqs.count)
      return `${entry.object}: holds key ${key} sequences ${held}, its manifest entry lists ${listed.first}..${listed.last} (${listed.count} records)`;
  }
  for (const key in entry.keys)
    if (!inFile.has(key)) return `${entry.object}: holds no record of key ${key}, which its manifest entry lists`;
  const held = [...unkeyedIds].sort();
  const listed = [...entry.unkeyed].sort();
  const differs = held.findIndex((id, i) => id !== listed[i]);
  if (differs >= 0 || held.length !== listed.length) {
    const extra = held.find((id) => !listed.includes(id));
    return extra !== undefined
      ? `${entry.object}: holds message ${extra} (no ordering key), which its manifest entry does not list`
      : `${entry.object}: holds ${held.length} messages without an ordering key, its manifest entry lists ${listed.length}`;
  }
  return undefined;
}

/** One line of `orderly audit`; `failing` false for what is information (cross-file skew). */
export const auditCheck = (label: string, f: AuditFinding, failing = true) => ({ label, count: f.count, examples: f.examples, failing });

/**
 * Reads the manifest and every object it lists back from the bucket and checks per-key order across
 * files: missing sequences, duplicates, order inside each file, and the cross-file timestamp skew
 * (file-name order disagreeing with sequence order). Restore order with ORDER BY ordering_key, sequence.
 * `filtered`: the subscription has a filter, whose refused messages leave gaps in each key's sequences;
 * then only what the manifest lists and no object holds is missing.
 *
 * Memory does not grow with the export's history: one manifest entry and one object are held at a time
 * (objects in name order, each read whole: as large as the subscription's maxBytes / maxMessages let it
 * be), and per key what the checks need (KeyAudit: about 700 bytes for a key exported in order, plus two
 * numbers per gap and an entry per duplicate). Messages without an ordering key are the exception: each
 * one's id is kept to find duplicates and losses (about 100 bytes a message).
 */
export async function auditObjects(
  s3: S3Client,
  manifest: ManifestReader,
  format: OutputFormat,
  { filtered = false }: { filtered?: boolean } = {},
): Promise<AuditReport> {
  const recordLevel = format.kind !== 'text' && format.writeMetadata;
  const report = emptyReport(recordLevel);
  const keys = new Map<string, KeyAudit>();
  const keyAudit = (key: string) => {
    let k = keys.get(key);
    if (!k) keys.set(key, (k = new KeyAudit(key)));
    return k;
  };
  const unkeyed = new Map<string, number>();
  const refs = manifest
    .committed()
    .sort((a, b) => Date.parse(a.createdAt) - Date.parse(b.createdAt) || (a.counter ?? 0) - (b.counter ?? 0));
  /** Unkeyed messages the manifest lists, and the object listing each: one no object holds is missing. */
  const listedUnkeyed = new Map<string, string>();
  /** Per key, the sequences of objects that are gone or unreadable: missing, each counted once. */
  const lost = new Map<string, SequenceRanges>();
  const lose = (entry: ManifestObject) => {
    for (const [key, range] of Object.entries(entry.keys)) {
      const seqs = lost.get(key) ?? new SequenceRanges();
      for (const seq of rangeSeqs(range)) {
        seqs.add(seq);
        note(report.missing, `${key}: sequence ${seq} (in ${entry.object}, which cannot be read)`);
      }
      lost.set(key, seqs);
    }
  };
  for (const ref of refs) {
    const entry = manifest.read(ref);
    report.objects++;
    for (const id of entry.unkeyed) listedUnkeyed.set(id, entry.object);
    const body = await fetchForAudit(s3, entry);
    if (!body) {
      note(report.objectErrors, `${entry.object}: missing from the bucket`);
      lose(entry);
      continue;
    }
    const { records, count, problem, unreadable } = await readObjectForAudit(body, entry, format);
    report.records += count;
    if (problem) note(report.objectErrors, problem);
    if (unreadable) {
      lose(entry);
      continue;
    }
    const file: NamedFile = { object: entry.object, named: Math.floor(Date.parse(entry.createdAt) / 1000), counter: entry.counter };
    const inFile = new Map<string, FileSeqs>();
    const hold = (key: string, seq: number) => {
      const seqs = inFile.get(key);
      if (seqs) seqs.add(seq);
      else inFile.set(key, new FileSeqs(seq));
      keyAudit(key).hold(seq);
    };
    if (recordLevel && records) {
      const unkeyedIds: string[] = [];
      for (const r of records) {
        if (!r.orderingKey) {
          unkeyedIds.push(r.messageId!);
          unkeyed.set(r.messageId!, (unkeyed.get(r.messageId!) ?? 0) + 1);
        } else hold(r.orderingKey, r.sequence!);
      }
      // What the entry lists and this object does not hold is missing unless another object holds it.
      for (const [key, range] of Object.entries(entry.keys)) {
        const k = keyAudit(key);
        const seqs = inFile.get(key);
        if (seqs?.matches(range)) continue;
        const here = new Set(records.filter((r) => r.orderingKey === key).map((r) => r.sequence!));
        for (const seq of rangeSeqs(range)) if (!here.has(seq)) k.listedElsewhere(seq, entry.object);
      }
      const mismatch = entryMismatch(entry, inFile, unkeyedIds);
      if (mismatch) note(report.objectErrors, mismatch);
    } else {
      for (const [key, range] of Object.entries(entry.keys)) for (const seq of rangeSeqs(range)) hold(key, seq);
      for (const id of entry.unkeyed) unkeyed.set(id, (unkeyed.get(id) ?? 0) + 1);
    }
    for (const [key, seqs] of inFile) keyAudit(key).file(file, seqs, report);
  }
  for (const [id, object] of listedUnkeyed)
    if (!unkeyed.has(id)) note(report.missing, `message ${id} (no ordering key), listed in ${object}`);
  report.keys = keys.size;
  for (const k of keys.values()) k.finish(report, filtered, lost.get(k.key));
  for (const [id, n] of unkeyed) if (n > 1) note(report.duplicates, `message ${id} (no ordering key) held ${n} times`);
  return report;
}

/**
 * The audit of one object-storage subscription (its name and uid: `core.identity(name).uid`), from the
 * job's data directory and S3 settings. Reads the manifest without changing it.
 */
export async function auditSubscription(
  subscription: { name: string; uid: string },
  config: ObjectStorageConfig,
  settings: { dataDir: string; objectStorage?: Record<string, unknown> },
  options: { filtered?: boolean } = {},
): Promise<AuditReport> {
  const s3 = createS3Client(s3Connection(settings.objectStorage));
  const manifest = new ManifestReader(manifestPath(settings.dataDir, subscription));
  try {
    return await auditObjects(s3, manifest, config.format, options);
  } finally {
    manifest.close();
    s3.destroy();
  }
}

/** The audit as `orderly audit` shows it (the connector's `audit` capability). Cross-file skew is information, not a failure. */
export async function auditExport(target: ExportTarget<ObjectStorageConfig>): Promise<AuditResult> {
  // A fleet's export (a remote subscription): its manifest lives in the bucket.
  if (target.shared) return (await import('./fleet-audit.js')).auditFleetExport(target);
  const filtered = target.filter !== undefined;
  const r = await auditSubscription(
    { name: target.subscription, uid: target.identity.uid },
    target.config,
    { dataDir: target.settings.dataDir, objectStorage: target.settings.objectStorage as Record<string, unknown> | undefined },
    { filtered },
  );
  const gaps = filtered ? "; gaps in a key's sequences not counted: the filter refused those messages" : '';
  return {
    summary: `objects ${r.objects}, records ${r.records}, keys ${r.keys} (${r.recordLevel ? 'checked record by record' : 'checked from manifest ranges'}${gaps})`,
    checks: [
      auditCheck('missing sequences', r.missing),
      auditCheck('duplicates', r.duplicates),
      auditCheck('out of order inside a file', r.outOfOrderInFile),
      auditCheck('keys with cross-file skew', r.skewedKeys, false),
      auditCheck('object errors', r.objectErrors),
    ],
    report: r,
  };
}

function rangeSeqs(range: ManifestObject['keys'][string]): number[] {
  // The manifest keeps first/last/count; a contiguous range is the common case and what we can check.
  return range.count === range.last - range.first + 1
    ? Array.from({ length: range.count }, (_, i) => range.first + i)
    : [range.first, range.last];
}

/** An object as its name orders it. */
interface NamedFile {
  object: string;
  /** The second the object's name carries (names have one-second resolution). */
  named: number;
  /** The file counter in its name, which orders the names of one second. */
  counter?: number;
}

/** Whether `a`'s name sorts before `b`'s by what names promise: the datetime, then the counter. */
function namedBefore(a: NamedFile, b: NamedFile): boolean {
  if (a.named !== b.named) return a.named < b.named;
  return a.counter !== undefined && b.counter !== undefined && a.counter < b.counter;
}

/** One key's sequences inside one object, in file order: what the checks need of them, not the list. */
class FileSeqs {
  first: number;
  last: number;
  count = 1;
  low: number;
  high: number;
  /** The first place the sequences go back: [previous, this]. */
  back?: [number, number];

  constructor(seq: number) {
    this.first = this.last = this.low = this.high = seq;
  }

  add(seq: number): void {
    if (!this.back && seq <= this.last) this.back = [this.last, seq];
    this.last = seq;
    this.count++;
    this.low = Math.min(this.low, seq);
    this.high = Math.max(this.high, seq);
  }

  /** Whether these are exactly a manifest range's sequences (consecutive ones: first..last, in order). */
  matches(range: ManifestObject['keys'][string]): boolean {
    return (
      !this.back &&
      this.first === range.first &&
      this.last === range.last &&
      this.count === range.count &&
      this.count === range.last - range.first + 1
    );
  }
}

/** An object holding a key, as the skew check remembers it. */
type KeyFile = NamedFile & { low: number; high: number };

/**
 * What the audit keeps of one key while it reads the objects in name order, and checks once they are read:
 * the sequences held (as ranges), those held more than once, those a readable object's entry lists but
 * that object does not hold, and for the cross-file skew the highest sequence of the objects named in
 * earlier seconds plus the key's objects of the current second.
 */
class KeyAudit {
  private readonly held = new SequenceRanges();
  /** Sequences held more than once: how many times. */
  private repeats?: Map<number, number>;
  /** Sequences a readable object's entry lists that the object does not hold, and that object. */
  private unheld?: Map<number, string>;
  /** The highest sequence in an object named in a second before `second`, and that object. */
  private before?: { high: number; object: string };
  private second = -Infinity;
  private sameSecond: KeyFile[] = [];
  private skewed = false;

  constructor(readonly key: string) {}

  hold(seq: number): void {
    if (this.held.add(seq)) return;
    this.repeats ??= new Map();
    this.repeats.set(seq, (this.repeats.get(seq) ?? 1) + 1);
  }

  listedElsewhere(seq: number, object: string): void {
    (this.unheld ??= new Map()).set(seq, object);
  }

  /** One object's sequences of the key, objects coming in name order: order inside it, and skew against those named before. */
  file(named: NamedFile, seqs: FileSeqs, report: AuditReport): void {
    if (seqs.back) note(report.outOfOrderInFile, `${this.key}: ${seqs.back[1]} after ${seqs.back[0]} in ${named.object}`);
    if (this.skewed) return;
    const file: KeyFile = { ...named, low: seqs.low, high: seqs.high };
    if (file.named !== this.second) {
      for (const f of this.sameSecond) if (!this.before || f.high > this.before.high) this.before = { high: f.high, object: f.object };
      this.sameSecond = [];
      this.second = file.named;
    }
    const skew = (later: KeyFile, earlier: { object: string; high: number }) => {
      this.skewed = true;
      this.sameSecond = [];
      note(
        report.skewedKeys,
        `${this.key}: ${later.object} holds sequence ${later.low}, but the earlier-named ${earlier.object} holds ${earlier.high}`,
      );
    };
    if (this.before && this.before.high > file.low) return skew(file, this.before);
    // Names within one second order by their counters, which need not follow the order objects are read in.
    const earlier = this.sameSecond.find((f) => namedBefore(f, file) && f.high > file.low);
    if (earlier) return skew(file, earlier);
    const later = this.sameSecond.find((f) => namedBefore(file, f) && file.high > f.low);
    if (later) return skew(later, file);
    // Sized to what it holds (one object, mostly), for every key: push would make room for 17.
    this.sameSecond = [...this.sameSecond, file];
  }

  /**
   * Once every object is read: duplicates, and sequences missing between the key's lowest and highest
   * (`lost`: those in objects that cannot be read, already counted missing).
   */
  finish(report: AuditReport, filtered: boolean, lost?: SequenceRanges): void {
    for (const [s, n] of this.repeats ?? []) note(report.duplicates, `${this.key}: sequence ${s} held ${n} times`);
    const unheld = [...(this.unheld ?? new Map<number, string>())].sort(([a], [b]) => a - b);
    const missing = (s: number, object?: string) =>
      note(
        report.missing,
        object === undefined ? `${this.key}: sequence ${s}` : `${this.key}: sequence ${s} (listed in ${object}, which does not hold it)`,
      );
    if (filtered) {
      for (const [s, object] of unheld) if (!this.held.has(s) && !lost?.has(s)) missing(s, object);
      return;
    }
    const bounds = [this.held.min, this.held.max, unheld[0]?.[0], unheld[unheld.length - 1]?.[0]].filter((s) => s !== undefined);
    if (!bounds.length) return;
    for (const [lo, hi] of this.held.gaps(Math.min(...bounds), Math.max(...bounds)))
      for (let s = lo; s <= hi; s++) if (!lost?.has(s)) missing(s, this.unheld?.get(s));
  }
}
