import { parquetReadObjects } from 'hyparquet';
import type { TestS3 } from '../helpers/s3.js';

/** One exported message as a sink holds it. `position` is the publisher's own per-key counter, from the payload. */
export interface SinkRecord {
  messageId: string;
  orderingKey: string;
  sequence: number;
  position: number;
}

/** Records in the order one container (a table, one object) holds them. */
export interface Container {
  name: string;
  records: SinkRecord[];
}

export interface Finding {
  count: number;
  examples: string[];
}

export interface DeliveryReport {
  records: number;
  /** Message ids held more than once (counted once per extra copy). */
  duplicates: Finding;
  /** Confirmed message ids held nowhere. */
  missing: Finding;
  /** Per key inside one container: a record whose publisher counter or sequence is not above the one before. */
  orderViolations: Finding;
}

const EXAMPLES = 5;
const note = (f: Finding, example: string) => {
  f.count++;
  if (f.examples.length < EXAMPLES) f.examples.push(example);
};

/**
 * Checks what the sink holds against what the publisher was told was published: every confirmed id
 * exactly once, no id twice (confirmed or not: an unconfirmed publish may have been stored), and per key,
 * inside each container, records in publish order (the publisher's counter and the key's sequence rising).
 */
export function checkDelivery(confirmed: Iterable<string>, containers: Container[]): DeliveryReport {
  const report: DeliveryReport = {
    records: 0,
    duplicates: { count: 0, examples: [] },
    missing: { count: 0, examples: [] },
    orderViolations: { count: 0, examples: [] },
  };
  const seen = new Set<string>();
  for (const { name, records } of containers) {
    const last = new Map<string, SinkRecord>();
    for (const r of records) {
      report.records++;
      if (seen.has(r.messageId)) note(report.duplicates, `${r.messageId} (key ${r.orderingKey}, sequence ${r.sequence}) again in ${name}`);
      seen.add(r.messageId);
      const before = last.get(r.orderingKey);
      if (before && (r.position <= before.position || r.sequence <= before.sequence)) {
        note(
          report.orderViolations,
          `${name}: key ${r.orderingKey} has #${r.position} (sequence ${r.sequence}) after #${before.position} (sequence ${before.sequence})`,
        );
      }
      last.set(r.orderingKey, r);
    }
  }
  for (const id of confirmed) if (!seen.has(id)) note(report.missing, id);
  return report;
}

/** Every record of all containers, per key in sequence order: how a reader restores order across files. */
export function restoredBySequence(containers: Container[]): Container {
  const records = containers
    .flatMap((c) => c.records)
    .sort((a, b) => (a.orderingKey < b.orderingKey ? -1 : a.orderingKey > b.orderingKey ? 1 : a.sequence - b.sequence));
  return { name: 'all objects by (ordering_key, sequence)', records };
}

/**
 * Reads Parquet objects (written with writeMetadata) back from the bucket with the `minio` client, not the
 * writer's SDK, and decodes them with hyparquet, not with DuckDB that wrote them. `position` parses the payload.
 */
export async function readParquetObjects(
  s3: TestS3,
  bucket: string,
  objects: string[],
  position: (data: Buffer) => number,
): Promise<Container[]> {
  const containers: Container[] = [];
  for (const name of objects) {
    const body = await s3.get(bucket, name);
    const file = body.buffer.slice(body.byteOffset, body.byteOffset + body.byteLength) as ArrayBuffer;
    const rows = (await parquetReadObjects({ file, columns: ['message_id', 'ordering_key', 'sequence', 'data'], utf8: false })) as {
      message_id: string;
      ordering_key: string;
      sequence: bigint;
      data: Uint8Array;
    }[];
    containers.push({
      name,
      records: rows.map((r) => ({
        messageId: r.message_id,
        orderingKey: r.ordering_key,
        sequence: Number(r.sequence),
        position: position(Buffer.from(r.data)),
      })),
    });
  }
  return containers;
}
