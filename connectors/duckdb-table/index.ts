import { InvalidArgumentError } from '../../src/core/errors.js';
import type { ConnectorFactory } from '../../src/connector/registry.js';
import { parseDuckDbTableConfig, type DuckDbTableConfig } from './config.js';
import { DuckDbTableWriter } from './table-writer.js';

/** `bigqueryConfig` subscriptions: rows into a table of the job's DuckDB database. */
export const duckdbTableConnector: ConnectorFactory<DuckDbTableConfig> = {
  name: 'duckdb-table',
  parseConfig: parseDuckDbTableConfig,
  create(config, context) {
    const path = context.settings.duckdbPath;
    if (!path) throw new InvalidArgumentError('duckdb', 'bigqueryConfig subscriptions need a DuckDB database file (settings.duckdbPath)');
    return new DuckDbTableWriter(config, context, path);
  },
};
