import { isUtf8 } from 'node:buffer';
import { DuckDBTypeId, blobValue, timestampTZValue, timestampValue, type DuckDBType, type DuckDBValue } from '@duckdb/node-api';
import type { ExportMessage } from '../../src/connector/connector.js';
import { decodeStoredMessage, givenTopicSchema, MessageSchemaError, type TopicSchema } from '../../src/schema/topic-schema.js';
import type { CompiledSchema } from '../../src/schema/schema-definition.js';
import {
  ColumnValueError,
  columnDefinitionsSql,
  mapSchemaToTable,
  UnmappableSchemaError,
  type TableMapping,
} from '../../src/schema/type-mapping.js';
import type { DuckDbTableConfig } from './config.js';
import { isJsonObject, parseJsonText, type JsonValue } from '../../src/schema/json-text.js';
import { ConversionError, toColumnValue } from './json-to-column.js';
import { narrowing, sameDuckDbType, type Narrow } from '../../src/schema/nested-field-drop.js';

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
/** With useTopicSchema the data is in the schema's columns: writeMetadata needs the others, `data` is optional. */
const TOPIC_SCHEMA_METADATA = ['subscription_name', 'message_id', 'publish_time', 'attributes'] as const;
const ORDERLY_METADATA = ['ordering_key', 'sequence'] as const;
const CDC_FIELDS = ['_CHANGE_TYPE', '_CHANGE_SEQUENCE_NUMBER'];
/**
 * The CDC field a message or schema field names, in any letter case as columns are: `_change_type` taken
 * for a column, or dropped as unknown, would turn a DELETE into an insert.
 */
function cdcFieldOf(field: string): string | undefined {
  return CDC_FIELDS.find((f) => f === field.toUpperCase());
}
/** RevisionColumns positions of a schema field without a column. */
const DROPPED = -1;
const CDC_FIELD = -2;
/** The column types writeMetadata fills each metadata column with (JSON is a VARCHAR to DuckDB). */
const METADATA_TYPES: Record<string, { ids: DuckDBTypeId[]; names: string }> = {
  subscription_name: { ids: [DuckDBTypeId.VARCHAR], names: 'VARCHAR' },
  message_id: { ids: [DuckDBTypeId.VARCHAR], names: 'VARCHAR' },
  publish_time: { ids: [DuckDBTypeId.TIMESTAMP, DuckDBTypeId.TIMESTAMP_TZ], names: 'TIMESTAMP or TIMESTAMPTZ' },
  attributes: { ids: [DuckDBTypeId.VARCHAR], names: 'VARCHAR or JSON' },
  ordering_key: { ids: [DuckDBTypeId.VARCHAR], names: 'VARCHAR' },
  sequence: { ids: [DuckDBTypeId.BIGINT, DuckDBTypeId.HUGEINT], names: 'BIGINT or HUGEINT' },
};

/** Where the columns of one schema revision go in the table (DROPPED by dropUnknownFields, or a CDC_FIELD). */
interface RevisionColumns {
  mapping: TableMapping;
  at: number[];
  /** Per schema field, how its value fits a STRUCT column with other nested fields (NULL, or dropped by dropUnknownFields). */
  narrow: (Narrow | undefined)[];
}

/**
 * Turns a message into a table row per bigqueryConfig. Throws SchemaMismatch (the table cannot take
 * this configuration at all) from the constructor, and ConversionError (this message does not fit) from
 * `map`. With useTopicSchema a message is decoded with the schema revision it was published under and
 * its fields go to the columns docs/schemas.md maps them to; a revision whose columns the table lacks (or
 * types differently) is a SchemaMismatch, found when the first message of that revision comes.
 */
export class RowMapper {
  private readonly byName = new Map<string, number>();
  /** Column positions by lower-case name: DuckDB names are case-insensitive. */
  private readonly byFoldedName = new Map<string, number>();
  private readonly revisions = new Map<string, RevisionColumns>();
  /** Column positions of the metadata fields, looked up once (map() runs per message). */
  private readonly at: Partial<Record<(typeof METADATA)[number] | (typeof ORDERLY_METADATA)[number], number>> = {};
  private readonly notNull: number[];
  /** Whether publish_time is TIMESTAMPTZ (an instant's natural type) rather than TIMESTAMP (UTC, as BigQuery's). */
  private readonly publishTimeTz: boolean;

  constructor(
    readonly columns: Column[],
    readonly primaryKey: string[],
    private readonly config: DuckDbTableConfig,
    private readonly subscription: string,
    private readonly topicSchema: () => TopicSchema | undefined = () => undefined,
  ) {
    columns.forEach((c, i) => {
      this.byName.set(c.name, i);
      this.byFoldedName.set(c.name.toLowerCase(), i);
    });
    for (const name of [...METADATA, ...ORDERLY_METADATA]) this.at[name] = this.byName.get(name);
    this.notNull = columns.flatMap((c, i) => (c.nullable ? [] : [i]));
    this.publishTimeTz = this.at.publish_time !== undefined && columns[this.at.publish_time]!.type.typeId === DuckDBTypeId.TIMESTAMP_TZ;
    const missing: string[] = [];
    if (config.writeMetadata)
      missing.push(...(config.useTopicSchema ? TOPIC_SCHEMA_METADATA : METADATA).filter((m) => !this.byName.has(m)));
    else if (!config.useTableSchema && !config.useTopicSchema && !this.byName.has('data')) missing.push('data');
    if (missing.length) {
      throw new SchemaMismatch(
        `table ${config.table} lacks the column(s) ${missing.join(', ')} that ${config.writeMetadata ? 'writeMetadata' : 'a table without useTableSchema'} needs`,
      );
    }
    if (config.writeMetadata) {
      // Checked now: a type the appender cannot take would fail every write, not one message.
      for (const [name, { ids, names }] of Object.entries(METADATA_TYPES)) {
        const i = this.byName.get(name);
        if (i !== undefined && !ids.includes(columns[i]!.type.typeId))
          throw new SchemaMismatch(
            `table ${config.table}: column ${name} is ${columns[i]!.type.toString()}; writeMetadata writes ${names}`,
          );
      }
    }
    if (config.useTopicSchema) {
      // The layout the topic has now must fit at once; older revisions are checked as their messages come.
      const current = this.topicSchema()?.current;
      const layout = current?.revisions.at(-1);
      if (current && layout) this.revisionColumns(`${current.schema}@${layout.revisionId}`, layout.schema);
    }
    const data = this.byName.get('data');
    if (data !== undefined && !config.useTableSchema && !config.useTopicSchema) {
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
    // Only a message that sets a CDC field gets an object for them (no allocation per plain row).
    let cdc: Record<string, unknown> | undefined;
    if (this.config.useTopicSchema) cdc = this.topicSchemaCells(em, cells);
    if (this.config.useTableSchema) {
      const record = parseJsonObject(m.data);
      const filled = new Map<number, string>();
      const cdcSpelling = new Map<string, string>();
      for (const [field, value] of Object.entries(record)) {
        const cdcField = cdcFieldOf(field);
        if (cdcField) {
          const other = cdcSpelling.get(cdcField);
          if (other !== undefined) throw new ConversionError(field, `fields "${other}" and "${field}" both name ${cdcField}`);
          cdcSpelling.set(cdcField, field);
          // null is no value, as for a nullable column and as the topic schema's CDC fields read it: a
          // change without a sequence number, or (no _CHANGE_TYPE) a plain row; not a malformed one.
          if (value !== null) (cdc ??= {})[cdcField] = value;
          continue;
        }
        // Column names are case-insensitive in DuckDB and BigQuery: `orderid` fills OrderId.
        const i = this.byName.get(field) ?? this.byFoldedName.get(field.toLowerCase());
        if (i !== undefined) {
          const other = filled.get(i);
          if (other !== undefined)
            throw new ConversionError(field, `fields "${other}" and "${field}" both name the column "${this.columns[i]!.name}"`);
          filled.set(i, field);
        }
        if (i === undefined || (this.config.writeMetadata && isMetadata(this.columns[i]!.name))) {
          if (i === undefined && !this.config.dropUnknownFields) {
            throw new ConversionError(
              field,
              `no column "${field}" in ${this.config.table} (set dropUnknownFields to ignore unknown fields)`,
            );
          }
          continue;
        }
        cells[i] = toColumnValue(value, this.columns[i]!.type, field, this.config);
      }
    }
    if (at.data !== undefined && (this.config.writeMetadata || (!this.config.useTableSchema && !this.config.useTopicSchema)))
      cells[at.data] = this.dataCell(em, at.data);
    if (this.config.writeMetadata) {
      cells[at.subscription_name!] = this.subscription;
      cells[at.message_id!] = m.messageId;
      const micros = BigInt(m.publishTime.getTime()) * 1000n;
      cells[at.publish_time!] = this.publishTimeTz ? timestampTZValue(micros) : timestampValue(micros);
      const attributes = m.orderingKey ? { ...m.attributes, orderingKey: m.orderingKey } : m.attributes;
      cells[at.attributes!] = JSON.stringify(attributes);
      if (at.ordering_key !== undefined) cells[at.ordering_key] = m.orderingKey;
      if (at.sequence !== undefined) cells[at.sequence] = BigInt(m.sequence);
    }
    const changeType = cdc?._CHANGE_TYPE;
    if (cdc && changeType !== undefined) return this.change(cdc, cells, changeType);
    this.refuseNulls(cells, true);
    return { kind: 'append', cells };
  }

  /** A NOT NULL column the message sets to null fails it, as does (`missingToo`) one it leaves without a default. */
  private refuseNulls(cells: Cell[], missingToo: boolean): void {
    for (const i of this.notNull) {
      const c = this.columns[i]!;
      if (cells[i] === null) throw new ConversionError(c.name, `column "${c.name}" is NOT NULL and the message has no value for it`);
      if (missingToo && cells[i] === DEFAULT && !c.hasDefault)
        throw new ConversionError(c.name, `column "${c.name}" is NOT NULL and the message has no value for it`);
    }
  }

  /**
   * Decodes the message with its schema revision and fills that revision's columns; returns the CDC
   * fields it sets (BigQuery takes _CHANGE_TYPE and _CHANGE_SEQUENCE_NUMBER from the topic schema too).
   */
  private topicSchemaCells(em: ExportMessage, cells: Cell[]): Record<string, unknown> {
    let values: DuckDBValue[];
    let columns: RevisionColumns;
    try {
      const { schemaName, revisionId, schema, decoded } = decodeStoredMessage(givenTopicSchema(this.topicSchema()), em.message);
      columns = this.revisionColumns(`${schemaName}@${revisionId}`, schema);
      values = columns.mapping.row(decoded);
    } catch (e) {
      if (e instanceof MessageSchemaError) throw new ConversionError('data', e.message);
      if (e instanceof ColumnValueError) throw new ConversionError(e.path, e.message);
      throw e;
    }
    const cdc: Record<string, unknown> = {};
    values.forEach((v, j) => {
      const i = columns.at[j]!;
      const narrow = columns.narrow[j];
      if (i >= 0) cells[i] = narrow && v !== null ? narrow(v) : v;
      else if (i === CDC_FIELD && v !== null && !(v === '' && columns.mapping.columns[j]!.implicitPresence))
        // A proto3 CDC field declared without `optional` decodes as "" when unset; BigQuery's Storage
        // Write API reads rows with proto2 semantics, where a default is not on the wire: no value.
        cdc[cdcFieldOf(columns.mapping.columns[j]!.name)!] = v;
    });
    return cdc;
  }

  /**
   * The table columns a schema revision's fields go to, checked once per revision: each field needs a
   * column of the same name and the mapped type (nullable if the field is), unless dropUnknownFields drops
   * it; every NOT NULL column without a default must be filled by a field or the metadata.
   */
  private revisionColumns(revision: string, schema: CompiledSchema): RevisionColumns {
    const known = this.revisions.get(revision);
    if (known) return known;
    const { table } = this.config;
    let mapping: TableMapping;
    try {
      mapping = mapSchemaToTable(schema);
    } catch (e) {
      if (e instanceof UnmappableSchemaError) throw new SchemaMismatch(`table ${table}: ${e.message}`);
      throw e;
    }
    const expected = `the topic schema (${revision}) maps to the columns ${columnDefinitionsSql(mapping.columns.filter((c) => !cdcFieldOf(c.name)))}`;
    const cdcSpelling = new Map<string, string>();
    const narrow: (Narrow | undefined)[] = [];
    const at = mapping.columns.map((c, j) => {
      const cdcField = cdcFieldOf(c.name);
      if (cdcField) {
        if (c.duckdbType !== 'VARCHAR')
          throw new SchemaMismatch(`table ${table}: the topic schema's field ${c.name} maps to ${c.duckdbType}; CDC takes a string`);
        const other = cdcSpelling.get(cdcField);
        if (other !== undefined)
          throw new SchemaMismatch(`table ${table}: the topic schema's fields "${other}" and "${c.name}" both name ${cdcField}`);
        cdcSpelling.set(cdcField, c.name);
        return CDC_FIELD;
      }
      const i = this.byName.get(c.name) ?? this.byFoldedName.get(c.name.toLowerCase());
      if (i === undefined) {
        if (this.config.dropUnknownFields) return DROPPED;
        throw new SchemaMismatch(
          `table ${table} has no column "${c.name}" for the topic schema's field (set dropUnknownFields to drop it); ${expected}`,
        );
      }
      const column = this.columns[i]!;
      if (this.config.writeMetadata && isMetadata(column.name)) {
        throw new SchemaMismatch(
          `table ${table}: the topic schema's field "${c.name}" has the name of a metadata column that writeMetadata fills`,
        );
      }
      if (!sameDuckDbType(column.type.toString(), c.duckdbType)) {
        narrow[j] = narrowing(c.shape, column.type, this.config.dropUnknownFields);
        if (!narrow[j])
          throw new SchemaMismatch(
            `table ${table}: column "${column.name}" is ${column.type.toString()}, but the topic schema's field maps to ${c.duckdbType}; ${expected}`,
          );
      }
      if (c.nullable && !column.nullable)
        throw new SchemaMismatch(
          `table ${table}: column "${column.name}" is NOT NULL, but the topic schema's field may be null; ${expected}`,
        );
      return i;
    });
    const filled = new Set(at);
    const metadata = this.config.writeMetadata ? [...METADATA, ...ORDERLY_METADATA].map((m) => this.byName.get(m)) : [];
    for (const i of metadata) if (i !== undefined) filled.add(i);
    const unfilled = this.columns.find((c, i) => !c.nullable && !c.hasDefault && !filled.has(i));
    if (unfilled)
      throw new SchemaMismatch(
        `table ${table}: column "${unfilled.name}" is NOT NULL without a default, and no field of the topic schema (${revision}) fills it`,
      );
    const result = { mapping, at, narrow };
    this.revisions.set(revision, result);
    return result;
  }

  private change(record: Record<string, unknown>, cells: Cell[], changeType: unknown): Row {
    if (changeType !== 'UPSERT' && changeType !== 'DELETE') {
      throw new ConversionError('_CHANGE_TYPE', `must be "UPSERT" or "DELETE", got ${JSON.stringify(changeType)}`);
    }
    if (!this.primaryKey.length)
      throw new SchemaMismatch(`table ${this.config.table} has no PRIMARY KEY, which CDC (_CHANGE_TYPE) writes need`);
    const seq = record._CHANGE_SEQUENCE_NUMBER;
    if (seq !== undefined && (typeof seq !== 'string' || !/^[0-9A-Fa-f]{1,16}(\/[0-9A-Fa-f]{1,16}){0,3}$/.test(seq))) {
      throw new ConversionError(
        '_CHANGE_SEQUENCE_NUMBER',
        `must be up to four '/'-separated hexadecimal sections, got ${JSON.stringify(seq)}`,
      );
    }
    const keyCells = this.primaryKey.map((k) => {
      const v = cells[this.byName.get(k)!];
      if (v === DEFAULT || v === null || v === undefined) throw new ConversionError(k, `primary key column "${k}" has no value`);
      return v;
    });
    // A DELETE needs its key only. An UPSERT may leave out a NOT NULL column of a row that has a value
    // there (it keeps it); one that would insert a row without that value is refused by the table, for
    // that message alone (the writer's commitOneByOne).
    if (changeType === 'UPSERT') this.refuseNulls(cells, false);
    // The key as its columns hold it, not as the JSON spelled it: 1 and "1" are one INTEGER key. Written
    // as JSON would write those values, so versions stored before under a number or a string still match.
    const pk = `[${keyCells.map((c) => (typeof c === 'string' ? JSON.stringify(c) : String(c))).join(',')}]`;
    return changeType === 'UPSERT'
      ? { kind: 'upsert', cells, pk, changeSequence: seq }
      : { kind: 'delete', keyCells, pk, changeSequence: seq };
  }

  private dataCell(em: ExportMessage, i: number): DuckDBValue {
    const type = this.columns[i]!.type;
    if (type.typeId === DuckDBTypeId.BLOB) return blobValue(em.message.data);
    // Read leniently, bytes that are not UTF-8 would be stored as U+FFFD: the message fails instead, as a
    // BigQuery STRING column refuses them.
    if (!isUtf8(em.message.data))
      throw new ConversionError('data', `not valid UTF-8 for the ${type.alias ?? 'VARCHAR'} column data (a BLOB column takes any bytes)`);
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

/** The message as a JSON object, read with Orderly's strict reader: integers past 2^53 exact, duplicate keys refused. */
function parseJsonObject(data: Buffer): Record<string, unknown> {
  if (!isUtf8(data)) throw new ConversionError('data', 'message data is not valid UTF-8, so not JSON');
  let parsed: JsonValue;
  try {
    // Digits a double would round stay as written, for DECIMAL columns (and JSON ones) to take exactly.
    parsed = parseJsonText(data.toString('utf8'), { exactNumbers: true });
  } catch (e) {
    throw new ConversionError('data', `message data is not valid JSON: ${(e as Error).message}`);
  }
  if (!isJsonObject(parsed)) {
    throw new ConversionError('data', 'message data must be a JSON object to map its fields to columns (useTableSchema)');
  }
  return parsed;
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
