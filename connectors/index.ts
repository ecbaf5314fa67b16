import { registerConnector } from '../src/connector/registry.js';
import { duckdbTableConnector } from './duckdb-table/index.js';
import { objectStorageConnector } from './object-storage/index.js';

/** The built-in connectors register exactly as a third-party one would. */
export function registerBuiltInConnectors(): void {
  registerConnector(duckdbTableConnector);
  registerConnector(objectStorageConnector);
}
