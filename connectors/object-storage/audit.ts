import { GetObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import type { AuditResult, ExportTarget } from '../../src/connector/capabilities.js';
import type { ObjectStorageConfig, OutputFormat } from './config.js';
import { Manifest, type ManifestObject } from './manifest.js';
import { manifestPath } from './object-writer.js';
import { readRecords, type ExportedRecord } from './record-format.js';
import { createS3Client, s3Connection } from './s3-client.js';

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
function entryMismatch(entry: ManifestObject, inFile: Map<string, number[]>, unkeyedIds: string[]): string | undefined {
  for (const [key, seqs] of inFile) {
    const listed = Object.hasOwn(entry.keys, key) ? entry.keys[key] : undefined;
    const held = `${seqs[0]}..${seqs[seqs.length - 1]} (${seqs.length} records)`;
    if (!listed) return `${entry.object}: holds key ${key} sequences ${held}, which its manifest entry does not list`;
    if (listed.first !== seqs[0] || listed.last !== seqs[seqs.length - 1] || listed.count !== seqs.length)
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
 */
export async function auditObjects(
  s3: S3Client,
  manifest: Manifest,
  format: OutputFormat,
  { filtered = false }: { filtered?: boolean } = {},
): Promise<AuditReport> {
  const recordLevel = format.kind !== 'text' && format.writeMetadata;
  const report = emptyReport(recordLevel);
  /** key -> per object (in creation order): the sequences it holds, in file order */
  const perKey = new Map<string, KeyFile[]>();
  const unkeyed = new Map<string, number>();
  const entries = manifest
    .committed()
    .sort((a, b) => Date.parse(a.createdAt) - Date.parse(b.createdAt) || (a.counter ?? 0) - (b.counter ?? 0));
  /** Unkeyed messages the manifest lists, and the object listing each: one no object holds is missing. */
  const listedUnkeyed = new Map<string, string>();
  /** Per key, the sequences of objects that are gone or unreadable: missing, each counted once. */
  const lost = new Map<string, Set<number>>();
  /**
   * Per key, the sequences readable objects' manifest entries list, and the object listing each: one that no
   * object holds is missing, also at either end of the key's range, where no gap between held ones shows it.
   */
  const listed = new Map<string, Map<number, string>>();
  const lose = (entry: ManifestObject) => {
    for (const [key, range] of Object.entries(entry.keys)) {
      const seqs = lost.get(key) ?? new Set<number>();
      for (const seq of rangeSeqs(range)) {
        seqs.add(seq);
        note(report.missing, `${key}: sequence ${seq} (in ${entry.object}, which cannot be read)`);
      }
      lost.set(key, seqs);
    }
  };
  for (const entry of entries) {
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
    const named = Math.floor(Date.parse(entry.createdAt) / 1000);
    const add = (key: string, seqs: number[]) => {
      const list = perKey.get(key) ?? [];
      list.push({ object: entry.object, named, counter: entry.counter, seqs });
      perKey.set(key, list);
    };
    if (recordLevel && records) {
      for (const [key, range] of Object.entries(entry.keys)) {
        const seqs = listed.get(key) ?? new Map<number, string>();
        for (const seq of rangeSeqs(range)) seqs.set(seq, entry.object);
        listed.set(key, seqs);
      }
      const inFile = new Map<string, number[]>();
      const unkeyedIds: string[] = [];
      for (const r of records) {
        if (!r.orderingKey) {
          unkeyedIds.push(r.messageId!);
          unkeyed.set(r.messageId!, (unkeyed.get(r.messageId!) ?? 0) + 1);
          continue;
        }
        const seqs = inFile.get(r.orderingKey) ?? [];
        seqs.push(r.sequence!);
        inFile.set(r.orderingKey, seqs);
      }
      for (const [key, seqs] of inFile) add(key, seqs);
      const mismatch = entryMismatch(entry, inFile, unkeyedIds);
      if (mismatch) note(report.objectErrors, mismatch);
    } else {
      for (const [key, range] of Object.entries(entry.keys)) add(key, rangeSeqs(range));
      for (const id of entry.unkeyed) unkeyed.set(id, (unkeyed.get(id) ?? 0) + 1);
    }
  }
  for (const [id, object] of listedUnkeyed)
    if (!unkeyed.has(id)) note(report.missing, `message ${id} (no ordering key), listed in ${object}`);
  // A key whose every listed record is gone from the objects that list it is held by none.
  for (const key of listed.keys()) if (!perKey.has(key)) perKey.set(key, []);
  report.keys = perKey.size;
  for (const [key, files] of perKey) checkKey(report, key, files, filtered, lost.get(key), listed.get(key));
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
  const manifest = Manifest.readOnly(manifestPath(settings.dataDir, subscription));
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

interface KeyFile {
  object: string;
  /** The second the object's name carries (names have one-second resolution). */
  named: number;
  /** The file counter in its name, which orders the names of one second. */
  counter?: number;
  seqs: number[];
}

/** Whether `a`'s name sorts before `b`'s by what names promise: the datetime, then the counter. */
function namedBefore(a: KeyFile, b: KeyFile): boolean {
  if (a.named !== b.named) return a.named < b.named;
  return a.counter !== undefined && b.counter !== undefined && a.counter < b.counter;
}

/**
 * `lost`: the key's sequences in objects that cannot be read, already counted missing; `listed`: the
 * sequences readable objects' manifest entries list, each with the object listing it. `filtered`: the
 * key's sequences skip what the subscription's filter refused, so only a listed one can be missing.
 */
function checkKey(
  report: AuditReport,
  key: string,
  files: KeyFile[],
  filtered: boolean,
  lost?: ReadonlySet<number>,
  listed?: ReadonlyMap<number, string>,
): void {
  const seen = new Map<number, number>();
  for (const { object, seqs } of files) {
    for (let i = 1; i < seqs.length; i++) {
      if (seqs[i]! <= seqs[i - 1]!) {
        note(report.outOfOrderInFile, `${key}: ${seqs[i]} after ${seqs[i - 1]} in ${object}`);
        break;
      }
    }
    for (const s of seqs) seen.set(s, (seen.get(s) ?? 0) + 1);
  }
  for (const [s, n] of seen) if (n > 1) note(report.duplicates, `${key}: sequence ${s} held ${n} times`);
  const all = [...seen.keys(), ...(listed?.keys() ?? [])].sort((a, b) => a - b);
  for (let s = all[0]!; s <= all[all.length - 1]!; s++) {
    if (seen.has(s) || lost?.has(s)) continue;
    const object = listed?.get(s);
    if (filtered && object === undefined) continue;
    note(
      report.missing,
      object === undefined ? `${key}: sequence ${s}` : `${key}: sequence ${s} (listed in ${object}, which does not hold it)`,
    );
  }
  if (!files.length) return;
  // Skew: an object holds a sequence below one held by an object named before it.
  for (const later of files) {
    const low = Math.min(...later.seqs);
    const earlier = files.find((f) => namedBefore(f, later) && Math.max(...f.seqs) > low);
    if (earlier) {
      note(
        report.skewedKeys,
        `${key}: ${later.object} holds sequence ${low}, but the earlier-named ${earlier.object} holds ${Math.max(...earlier.seqs)}`,
      );
      return;
    }
  }
}
