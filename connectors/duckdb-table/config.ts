import { InvalidArgumentError, UnknownFieldError } from '../../src/core/errors.js';
import { checkServiceAccountEmail } from '../../src/core/service-account.js';

/** Pub/Sub's `bigqueryConfig`, as Orderly maps it onto DuckDB. */
export interface DuckDbTableConfig {
  /** `project.dataset.table` as given. */
  table: string;
  /** dataset -> DuckDB schema */
  schema: string;
  /** table -> DuckDB table */
  tableName: string;
  useTableSchema: boolean;
  /** Message data decoded with the topic's schema, its top-level fields in same-named columns (docs/schemas.md). */
  useTopicSchema: boolean;
  writeMetadata: boolean;
  dropUnknownFields: boolean;
}

const FIELD = 'bigqueryConfig';

export function parseDuckDbTableConfig(raw: unknown): DuckDbTableConfig {
  if (!raw || typeof raw !== 'object') throw new InvalidArgumentError(FIELD, 'must be an object');
  const c = raw as Record<string, unknown>;
  const known = ['table', 'useTopicSchema', 'useTableSchema', 'writeMetadata', 'dropUnknownFields', 'serviceAccountEmail', 'state'];
  for (const k of Object.keys(c)) if (!known.includes(k)) throw new UnknownFieldError(`${FIELD}.${k}`, [k], known);
  for (const k of ['useTopicSchema', 'useTableSchema', 'writeMetadata', 'dropUnknownFields'] as const) {
    if (c[k] !== undefined && typeof c[k] !== 'boolean')
      throw new InvalidArgumentError(`${FIELD}.${k}`, `must be true or false, got ${JSON.stringify(c[k])}`);
  }
  if (c.useTopicSchema && c.useTableSchema) {
    throw new InvalidArgumentError(`${FIELD}.useTableSchema`, 'useTopicSchema and useTableSchema are mutually exclusive');
  }
  if (c.dropUnknownFields && !c.useTableSchema && !c.useTopicSchema) {
    throw new InvalidArgumentError(`${FIELD}.dropUnknownFields`, 'only applies with useTableSchema or useTopicSchema');
  }
  // Unset (or empty, as proto3 sends it unset): Pub/Sub's own service agent.
  if (c.serviceAccountEmail !== undefined && c.serviceAccountEmail !== '')
    checkServiceAccountEmail(`${FIELD}.serviceAccountEmail`, c.serviceAccountEmail);
  // The table last: a job file's check sets each refused field aside and parses again, and one that is then
  // missing ends it, so a bad table checked first hid every other problem of the section.
  if (typeof c.table !== 'string') throw new InvalidArgumentError(`${FIELD}.table`, 'is required: "project.dataset.table"');
  // BigQuery also accepts the legacy "project:dataset.table".
  const parts = c.table.replace(':', '.').split('.');
  if (parts.length !== 3 || parts.some((p) => p === '')) {
    throw new InvalidArgumentError(`${FIELD}.table`, `must be "project.dataset.table", got ${JSON.stringify(c.table)}`);
  }
  const [, dataset, table] = parts as [string, string, string];
  // BigQuery's rules: what it would refuse can name no table to write to.
  if (!/^[A-Za-z0-9_]{1,1024}$/.test(dataset))
    throw new InvalidArgumentError(
      `${FIELD}.table`,
      `the dataset ${JSON.stringify(dataset)} must be 1-1024 letters, digits or underscores, got ${JSON.stringify(c.table)}`,
    );
  if (!/^[\p{L}\p{M}\p{N}\p{Pc}\p{Pd}\p{Zs}]+$/u.test(table) || Buffer.byteLength(table) > 1024)
    throw new InvalidArgumentError(
      `${FIELD}.table`,
      `the table ${JSON.stringify(table)} must be 1-1024 bytes of letters, marks, digits, connectors such as "_", dashes and spaces, got ${JSON.stringify(c.table)}`,
    );
  return {
    table: c.table,
    schema: dataset,
    tableName: table,
    useTableSchema: c.useTableSchema === true,
    useTopicSchema: c.useTopicSchema === true,
    writeMetadata: c.writeMetadata === true,
    dropUnknownFields: c.dropUnknownFields === true,
  };
}
