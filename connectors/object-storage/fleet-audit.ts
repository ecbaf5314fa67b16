import type { S3Client } from '@aws-sdk/client-s3';
import type { AuditResult, ExportTarget } from '../../src/connector/capabilities.js';
import { auditCheck, emptyReport, fetchForAudit, note, readObjectForAudit, type AuditReport } from './audit.js';
import { fleetManifestPrefix, listKeys, readFleetManifest } from './bucket-manifest.js';
import type { ObjectStorageConfig } from './config.js';
import { manifestView } from './manifest-view.js';
import { createS3Client, s3Connection } from './s3-client.js';

/** The audit of an export a fleet of workers shares (a remote subscription): the manifest view, checked against the objects. */
export interface FleetAuditReport extends AuditReport {
  /** Distinct messages in the manifest view. */
  messages: number;
  /** Records a copy in an earlier object supersedes (Pub/Sub redelivered them, often to another worker): not in the view, not an error. */
  superseded: number;
  /** The workers whose objects the view holds. */
  workers: string[];
  /** Uploads started and not committed yet: in progress, or left by a stopped worker until another settles them. */
  pendingUploads: number;
  /**
   * What per-key order is checked against: a remote Pub/Sub numbers no key's messages, so the publish
   * time, which never goes back within a key (a key's publishes are sent one after another).
   */
  orderBy: 'publish time';
}

/**
 * Reads the fleet's manifest from the bucket and every object it lists, and checks the manifest view (each
 * message once: see manifestView):
 * - `objectErrors`: an object missing, or holding other records than its entry lists (count; and, where
 *   records carry metadata, their message ids and order);
 * - `missing`: messages the manifest lists that their object does not hold;
 * - `duplicates`: a message the view holds more than once (by the ids the objects carry where they carry
 *   them, else the manifest's);
 * - `outOfOrderInFile`: within one object, a key's messages (those the view counts) going back in publish time;
 * - `skewedKeys`: a key whose objects listed by name disagree with publish order (objects of different
 *   workers interleave; see docs/ordering-in-object-storage.md).
 */
export async function auditFleetObjects(
  s3: S3Client,
  subscription: { name: string; uid: string },
  config: ObjectStorageConfig,
): Promise<FleetAuditReport> {
  const { format, bucket } = config;
  const recordLevel = format.kind !== 'text' && format.writeMetadata;
  const report: FleetAuditReport = {
    ...emptyReport(recordLevel),
    messages: 0,
    superseded: 0,
    workers: [],
    pendingUploads: 0,
    orderBy: 'publish time',
  };
  const view = manifestView(await readFleetManifest(s3, bucket, subscription));
  report.messages = view.messages;
  report.superseded = view.superseded;
  report.workers = [...new Set(view.objects.map((o) => o.entry.worker ?? '?'))].sort();
  report.pendingUploads = (await listKeys(s3, bucket, `${fleetManifestPrefix(subscription)}pending/`)).length;
  const held = new Map<string, number>();
  /** Per key, per object (by name): the publish times of the records the view counts, in file order. */
  const perKey = new Map<string, { object: string; times: number[] }[]>();
  for (const { entry, counts } of view.objects) {
    report.objects++;
    const listed = entry.messages ?? [];
    const body = await fetchForAudit(s3, entry);
    if (!body) {
      note(report.objectErrors, `${entry.object}: missing from the bucket`);
      listed.forEach(([id], i) => counts[i] && note(report.missing, `message ${id} (in ${entry.object})`));
      continue;
    }
    const { records, count, problem } = await readObjectForAudit(body, entry, format);
    report.records += count;
    if (problem) note(report.objectErrors, problem);
    for (let i = count; i < listed.length; i++) if (counts[i]) note(report.missing, `message ${listed[i]![0]} (in ${entry.object})`);
    if (recordLevel && records) {
      const mismatch = records.findIndex((r, i) => listed[i] !== undefined && r.messageId !== listed[i][0]);
      if (mismatch >= 0)
        note(
          report.objectErrors,
          `${entry.object}: record ${mismatch} is message ${records[mismatch]!.messageId}, manifest lists ${listed[mismatch]![0]}`,
        );
    }
    const inFile = new Map<string, number[]>();
    listed.forEach(([id, key, publishMs], i) => {
      if (!counts[i] || i >= count) return;
      const heldId = records?.[i]!.messageId ?? id;
      held.set(heldId, (held.get(heldId) ?? 0) + 1);
      if (key === '') return;
      const times = inFile.get(key) ?? [];
      times.push(publishMs);
      inFile.set(key, times);
    });
    for (const [key, times] of inFile) {
      const back = times.findIndex((t, i) => i > 0 && t < times[i - 1]!);
      if (back > 0)
        note(
          report.outOfOrderInFile,
          `${key}: in ${entry.object}, a message published at ${iso(times[back]!)} after one published at ${iso(times[back - 1]!)}`,
        );
      const files = perKey.get(key) ?? [];
      files.push({ object: entry.object, times });
      perKey.set(key, files);
    }
  }
  for (const [id, n] of held) if (n > 1) note(report.duplicates, `message ${id} held ${n} times in the manifest view`);
  report.keys = perKey.size;
  for (const [key, files] of perKey) {
    files.sort((a, b) => (a.object < b.object ? -1 : a.object > b.object ? 1 : 0));
    for (let i = 1; i < files.length; i++) {
      const earlierMax = Math.max(...files.slice(0, i).flatMap((f) => f.times));
      const low = Math.min(...files[i]!.times);
      if (low < earlierMax) {
        note(
          report.skewedKeys,
          `${key}: ${files[i]!.object} holds a message published at ${iso(low)}, but an object named before it one published at ${iso(earlierMax)}`,
        );
        break;
      }
    }
  }
  return report;
}

/** The audit of a fleet's export (the `audit` capability for a shared target), from the job's S3 settings. Changes nothing. */
export async function auditFleetExport(target: ExportTarget<ObjectStorageConfig>): Promise<AuditResult> {
  const s3 = createS3Client(s3Connection(target.settings.objectStorage as Record<string, unknown> | undefined));
  let r: FleetAuditReport;
  try {
    r = await auditFleetObjects(s3, { name: target.subscription, uid: target.identity.uid }, target.config);
  } finally {
    s3.destroy();
  }
  return {
    summary:
      `objects ${r.objects} from ${r.workers.length} worker(s), records ${r.records}, messages in the manifest view ${r.messages} ` +
      `(${r.superseded} redelivered copies superseded), keys ${r.keys}, uploads pending ${r.pendingUploads}; order checked by ${r.orderBy}`,
    checks: [
      auditCheck('missing messages', r.missing),
      auditCheck('duplicates in the manifest view', r.duplicates),
      auditCheck('out of order inside a file', r.outOfOrderInFile, !target.unordered),
      auditCheck('keys with cross-file skew', r.skewedKeys, false),
      auditCheck('object errors', r.objectErrors),
    ],
    report: r,
  };
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}
