import { z } from 'zod';
import { lazyConnector } from '../../src/connector/lazy-connector.js';
import type { ConnectorFactory } from '../../src/connector/registry.js';
import type { SettingsSection } from '../../src/connector/settings-section.js';
import { InvalidArgumentError } from '../../src/core/errors.js';
import { parseDuckDbTableConfig, type DuckDbTableConfig } from './config.js';

/** The job's DuckDB database: `duckdb: { path, init }` in the job file. */
const duckdbSection: SettingsSection<{ path: string; init: string[] }> = {
  key: 'duckdb',
  schema: z.strictObject({ path: z.string(), init: z.array(z.string()).default([]) }),
  resolvePaths: (settings, resolvePath) => ({ ...settings, path: resolvePath(settings.path) }),
  async open({ path, init }, { readOnly, logger }) {
    // Read-only commands leave the file alone: no setup statements, and the query opens it itself.
    const { closeDuckDb, duckDbLockHolder, queryDuckDb } = await import('../../src/duckdb/database.js');
    let ran: Promise<void> | undefined;
    const runInit = () =>
      (ran ??= (async () => {
        for (const sql of init) await queryDuckDb(path, sql);
      })().catch((e: unknown) => {
        ran = undefined;
        throw e;
      }));
    try {
      if (!readOnly) await runInit();
    } catch (e) {
      // Another process (a worker of the same fleet) holds the file: its exports wait as standbys, and the
      // one that takes the file over runs the statements then (the holder may have run older ones).
      const holder = duckDbLockHolder(e);
      if (holder === undefined) throw e;
      logger.info(
        { duckdb: path, holder },
        'the DuckDB file is open in another process; its init statements run once this process takes it over',
      );
      return { settings: { duckdbPath: path, duckdbInit: runInit }, queryDatabase: path, close: () => closeDuckDb(path) };
    }
    return { settings: { duckdbPath: path }, queryDatabase: path, close: () => closeDuckDb(path) };
  },
};

/** `bigqueryConfig` subscriptions: rows into a table of the job's DuckDB database. */
export const duckdbTableConnector: ConnectorFactory<DuckDbTableConfig, { path: string; init: string[] }> = {
  name: 'duckdb-table',
  parseConfig: parseDuckDbTableConfig,
  settings: duckdbSection,
  requiresSettings: 'duckdb.path',
  // DuckDB's checkpoints take memory of the exporting process beyond its memory_limit (~20 MiB over the
  // drain's median at each), on top of the heap and the payloads read ahead: a 1M-message drain peaked at
  // 320-338 MiB with the window and budget at 20,000 and the heap growing 60%, at 287-288 with the three
  // below (docs/benchmarks.md § Memory). A text or Parquet export keeps the defaults: its payloads are
  // what its files are made of.
  memory: { windowMessages: 10_000, exportMessages: 10_000, heapGrowthPercent: 30 },
  counters: {
    rowsAppended: { metric: 'orderly_rows_appended_total', help: 'Rows appended to DuckDB tables' },
    changesApplied: {
      metric: 'orderly_cdc_changes_applied_total',
      help: 'CDC changes (_CHANGE_TYPE UPSERT or DELETE) applied to DuckDB tables; those older than their row are skipped',
    },
  },
  create(config, context) {
    const path = context.settings.duckdbPath;
    if (typeof path !== 'string')
      throw new InvalidArgumentError(
        'duckdb',
        "bigqueryConfig subscriptions need a DuckDB database file: the job's duckdb.path (a server reads it from `orderly serve --config <job file>`)",
      );
    return lazyConnector(async () => new (await import('./table-writer.js')).DuckDbTableWriter(config, context, path));
  },
  async load() {
    await import('./table-writer.js');
  },
};
