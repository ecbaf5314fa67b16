/** SQL quoting. Every identifier Orderly puts in SQL goes through quoteIdent, so no name can inject SQL. */
export function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/** A SQL string literal of `value` (for file names and other values put in SQL). */
export function quoteString(value: string): string {
  return `'${value.replaceAll("'", "''")}'`;
}
