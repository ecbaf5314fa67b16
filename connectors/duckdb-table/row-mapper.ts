import { DuckDBTypeId, blobValue, timestampValue, type DuckDBType, type DuckDBValue } from '@duckdb/node-api';
import type { ExportMessage } from '../../src/connector/connector.js';
import type { DuckDbTableConfig } from './config.js';
import { ConversionError, toColumnValue } from './json-to-column.js';

export interface Column {
  name: string;
  type: DuckDBType;
  nullable: boolean;
  hasDefault: boolean;
}

/** Appends the column's default (or NULL) where the message has no value. */
export const DEFAULT = Symbol('default');
export type Cell = DuckDBValue | typeof DEFAULT;

export type Row =
  | { kind: 'append'; cells: Cell[] }
  | { kind: 'upsert'; cells: Cell[]; pk: string; changeSequence?: string }
  | { kind: 'delete'; keyCells: DuckDBValue[]; pk: string; changeSequence?: string };

/** Columns BigQuery's writeMetadata fills; Orderly adds ordering_key and sequence. */
const METADATA = ['subscription_name', 'message_id', 'publish_time', 'data', 'attributes'] as const;
const ORDERLY_METADATA = ['ordering_key', 'sequence'] as const;
const CDC_FIELDS = ['_CHANGE_TYPE', '_CHANGE_SEQUENCE_NUMBER'];

/**
 * Turns a message into a table row per bigqueryConfig. Throws SchemaMismatch (the table cannot take
 * this configuration at all) from the constructor, and ConversionError (this message does not fit) from
 * `map`.
 */
export class RowMapper {
  private readonly byName = new Map<string, number>();
  /** Column positions of the metadata fields, looked up once (map() runs per message). */
  private readonly at: Partial<Record<(typeof METADATA)[number] | (typeof ORDERLY_METADATA)[number], number>> = {};
  private readonly notNull: number[];

  constructor(
    readonly columns: Column[],
    readonly primaryKey: string[],
    private readonly config: DuckDbTableConfig,
    private readonly subscription: string,
  ) {
    columns.forEach((c, i) => this.byName.set(c.name, i));
    for (const name of [...METADATA, ...ORDERLY_METADATA]) this.at[name] = this.byName.get(name);
    this.notNull = columns.flatMap((c, i) => (c.nullable ? [] : [i]));
    const missing: string[] = [];
    if (config.writeMetadata) missing.push(...METADATA.filter((m) => !this.byName.has(m)));
    else if (!config.useTableSchema && !this.byName.has('data')) missing.push('data');
    if (missing.length) {
      throw new SchemaMismatch(
        `table ${config.table} lacks the column(s) ${missing.join(', ')} that ${config.writeMetadata ? 'writeMetadata' : 'a table without useTableSchema'} needs`,
      );
    }
    const data = this.byName.get('data');
    if (data !== undefined && !config.useTableSchema) {
      const t = columns[data]!.type;
      if (t.typeId !== DuckDBTypeId.BLOB && t.typeId !== DuckDBTypeId.VARCHAR) {
        throw new SchemaMismatch(`table ${config.table}: column data is ${t.toString()}; it must be BLOB, VARCHAR or JSON`);
      }
    }
  }

  map(em: ExportMessage): Row {
    const cells: Cell[] = new Array<Cell>(this.columns.length).fill(DEFAULT);
    const at = this.at;
    const m = em.message;
    let record: Record<string, unknown> | undefined;
    if (this.config.useTableSchema) {
      record = parseJsonObject(m.data);
      for (const [field, value] of Object.entries(record)) {
        if (CDC_FIELDS.includes(field)) continue;
        const i = this.byName.get(field);
        if (i === undefined || (this.config.writeMetadata && isMetadata(field))) {
          if (i === undefined && !this.config.dropUnknownFields) {
            throw new ConversionError(field, `no column "${field}" in ${this.config.table} (set dropUnknownFields to ignore unknown fields)`);
          }
          continue;
        }
        cells[i] = toColumnValue(value, this.columns[i]!.type, field, this.config);
      }
    }
    if (at.data !== undefined && (this.config.writeMetadata || !this.config.useTableSchema)) cells[at.data] = this.dataCell(em, at.data);
    if (this.config.writeMetadata) {
      cells[at.subscription_name!] = this.subscription;
      cells[at.message_id!] = m.messageId;
      cells[at.publish_time!] = timestampValue(BigInt(m.publishTime.getTime()) * 1000n);
      const attributes = m.orderingKey ? { ...m.attributes, orderingKey: m.orderingKey } : m.attributes;
      cells[at.attributes!] = JSON.stringify(attributes);
      if (at.ordering_key !== undefined) cells[at.ordering_key] = m.orderingKey;
      if (at.sequence !== undefined) cells[at.sequence] = BigInt(m.sequence);
    }
    for (const i of this.notNull) {
      const c = this.columns[i]!;
      if (cells[i] === null || (cells[i] === DEFAULT && !c.hasDefault)) {
        throw new ConversionError(c.name, `column "${c.name}" is NOT NULL and the message has no value for it`);
      }
    }
    const changeType = record?._CHANGE_TYPE;
    if (changeType === undefined) return { kind: 'append', cells };
    return this.change(record!, cells, changeType);
  }

  private change(record: Record<string, unknown>, cells: Cell[], changeType: unknown): Row {
    if (changeType !== 'UPSERT' && changeType !== 'DELETE') {
      throw new ConversionError('_CHANGE_TYPE', `must be "UPSERT" or "DELETE", got ${JSON.stringify(changeType)}`);
    }
    if (!this.primaryKey.length) throw new SchemaMismatch(`table ${this.config.table} has no PRIMARY KEY, which CDC (_CHANGE_TYPE) writes need`);
    const seq = record._CHANGE_SEQUENCE_NUMBER;
    if (seq !== undefined && (typeof seq !== 'string' || !/^[0-9A-Fa-f]{1,16}(\/[0-9A-Fa-f]{1,16}){0,3}$/.test(seq))) {
      throw new ConversionError('_CHANGE_SEQUENCE_NUMBER', `must be up to four '/'-separated hexadecimal sections, got ${JSON.stringify(seq)}`);
    }
    const keyCells = this.primaryKey.map((k) => {
      const v = cells[this.byName.get(k)!];
      if (v === DEFAULT || v === null || v === undefined) throw new ConversionError(k, `primary key column "${k}" has no value`);
      return v;
    });
    const pk = JSON.stringify(this.primaryKey.map((k) => record[k]));
    return changeType === 'UPSERT' ? { kind: 'upsert', cells, pk, changeSequence: seq } : { kind: 'delete', keyCells, pk, changeSequence: seq };
  }

  private dataCell(em: ExportMessage, i: number): DuckDBValue {
    const type = this.columns[i]!.type;
    if (type.typeId === DuckDBTypeId.BLOB) return blobValue(em.message.data);
    const text = em.message.data.toString('utf8');
    if (type.alias === 'JSON') {
      try {
        JSON.parse(text);
      } catch (e) {
        throw new ConversionError('data', `not valid JSON for the JSON column data: ${(e as Error).message}`);
      }
    }
    return text;
  }
}

export class SchemaMismatch extends Error {}

function isMetadata(field: string): boolean {
  return (METADATA as readonly string[]).includes(field) || (ORDERLY_METADATA as readonly string[]).includes(field);
}

function parseJsonObject(data: Buffer): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(data.toString('utf8'));
  } catch (e) {
    throw new ConversionError('data', `message data is not valid JSON: ${(e as Error).message}`);
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new ConversionError('data', 'message data must be a JSON object to map its fields to columns (useTableSchema)');
  }
  return parsed as Record<string, unknown>;
}

/** BigQuery's _CHANGE_SEQUENCE_NUMBER order: section by section, each a hexadecimal number. */
export function compareChangeSequence(a: string, b: string): number {
  const pa = a.split('/').map((s) => BigInt(`0x${s}`));
  const pb = b.split('/').map((s) => BigInt(`0x${s}`));
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const x = pa[i] ?? 0n;
    const y = pb[i] ?? 0n;
    if (x !== y) return x < y ? -1 : 1;
  }
  return 0;
}
