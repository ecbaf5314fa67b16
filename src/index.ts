/**
 * `orderly`: the embedded ordered subscription core (topics, subscriptions, ordering keys, pull, callback
 * subscribers, push, seek), its durable store, the publisher, and the export manager that runs export
 * subscriptions through registered connectors. Connector authors: `orderly/connector`; their tests:
 * `orderly/testing`.
 */
export * from './core/index.js';
export { SqliteStore, STORE_ID_FILE, type SqliteStoreOptions } from './store/sqlite-store.js';
export {
  StoreCheckError,
  StoreCorruptError,
  StoreFullError,
  StoreIdentityError,
  StoreInUseError,
  StoreUnwritableError,
  StoreUpgradeError,
  StoreVersionError,
  type Store,
  type SubscriptionRecord,
} from './store/store.js';
export { ExportManager, type ExportManagerOptions } from './connector/export-manager.js';
export type { ExportStats } from './connector/export-runner.js';
export { registerBuiltInConnectors } from '../connectors/index.js';
export { createLogger, type Logger } from './log.js';
export { queryDuckDb } from './duckdb/live-query.js';
