import {
  DuckDBListType,
  DuckDBMapType,
  DuckDBStructType,
  listValue,
  mapValue,
  structValue,
  type DuckDBListValue,
  type DuckDBMapValue,
  type DuckDBStructValue,
  type DuckDBType,
  type DuckDBValue,
} from '@duckdb/node-api';

/** A column type mapped from a topic schema: its SQL, and the parts of a STRUCT, LIST or MAP. */
export interface TypeShape {
  sql: string;
  parts?:
    | { kind: 'struct'; entries: readonly { name: string; shape: TypeShape }[] }
    | { kind: 'list'; item: TypeShape }
    | { kind: 'map'; key: TypeShape; value: TypeShape };
}

/** Turns a value of a mapped type into one of the table's type. */
export type Narrow = (value: DuckDBValue) => DuckDBValue;

/** Whether two DuckDB SQL types are one (DuckDB prints TIMESTAMPTZ back as TIMESTAMP WITH TIME ZONE). */
export function sameDuckDbType(a: string, b: string): boolean {
  const canonical = (sql: string) => sql.replaceAll('TIMESTAMPTZ', 'TIMESTAMP WITH TIME ZONE');
  return canonical(a) === canonical(b);
}

/**
 * The top-level column rules, applied inside STRUCT columns: a revision that adds an optional field to a nested record is compatible,
 * so the messages of one revision lack a field its STRUCT column has (NULL there, as a table's extra
 * nullable column is), and with `dropUnknown` (dropUnknownFields) the messages of another have fields the
 * column lacks: Pub/Sub drops "any fields that are a part of the topic schema that are not part of the
 * BigQuery table schema", and a field of a record is one. How a value of `shape` becomes one of the
 * table's `type` when they differ only so in fields of STRUCTs, also inside LISTs and MAPs (named in any
 * letter case, as DuckDB names are); undefined when they differ otherwise.
 */
export function narrowing(shape: TypeShape, type: DuckDBType, dropUnknown: boolean): Narrow | undefined {
  if (sameDuckDbType(shape.sql, type.toString())) return (v) => v;
  const parts = shape.parts;
  if (parts?.kind === 'struct' && type instanceof DuckDBStructType) {
    const entries = type.entryNames.map((name, i) => {
      const from = parts.entries.find((e) => e.name.toLowerCase() === name.toLowerCase());
      return { name, from: from?.name, narrow: from && narrowing(from.shape, type.entryTypes[i]!, dropUnknown) };
    });
    if (entries.some((e) => e.from !== undefined && !e.narrow)) return undefined;
    if (!dropUnknown && parts.entries.length > entries.filter((e) => e.from !== undefined).length) return undefined;
    return (v) => {
      const given = (v as DuckDBStructValue).entries;
      // No prototype: a field named "__proto__" stays a field.
      const out = Object.create(null) as Record<string, DuckDBValue>;
      for (const e of entries) {
        const x = e.from === undefined ? null : given[e.from];
        out[e.name] = x === null || x === undefined ? null : e.narrow!(x);
      }
      return structValue(out);
    };
  }
  if (parts?.kind === 'list' && type instanceof DuckDBListType) {
    const item = narrowing(parts.item, type.valueType, dropUnknown);
    return item && ((v) => listValue((v as DuckDBListValue).items.map((x) => (x === null ? null : item(x)))));
  }
  if (parts?.kind === 'map' && type instanceof DuckDBMapType && sameDuckDbType(parts.key.sql, type.keyType.toString())) {
    const value = narrowing(parts.value, type.valueType, dropUnknown);
    return (
      value &&
      ((v) => mapValue((v as DuckDBMapValue).entries.map((e) => ({ key: e.key, value: e.value === null ? null : value(e.value) }))))
    );
  }
  return undefined;
}
