/**
 * Runs a query on a DuckDB database file this process exports into (a `bigqueryConfig` subscription's
 * table), on a second connection of the writer's own instance: DuckDB lets one process open a file for
 * writing, so while the export runs this is the way to read it. It sees every committed batch. Rows come
 * as plain objects (BIGINTs as bigint). DuckDB is loaded when this is first called, not with the package.
 */
export async function queryDuckDb(path: string, sql: string): Promise<Record<string, unknown>[]> {
  return (await import('./database.js')).queryDuckDb(path, sql);
}
