/**
 * `orderly/connector`: what a connector author needs — the contract a connector implements, the registry
 * it registers its factory in (with its settings section and capabilities), and the shared building
 * blocks. A module that calls `registerConnector` is a plugin: list it in a job file's `plugins:`.
 * Test a connector with `orderly/testing`.
 */
export {
  emptyResult,
  SinkBusyError,
  SinkStateError,
  type Connector,
  type ConnectorContext,
  type ConnectorCounters,
  type ConnectorSettings,
  type ExportMessage,
  type WriteResult,
} from './connector.js';
export { getConnector, registerConnector, registeredConnectors, type ConnectorFactory } from './registry.js';
export type { AuditCheck, AuditResult, CounterMetric, ExportMemory, ExportTarget, QueryView } from './capabilities.js';
export type { OpenSection, SectionContext, SettingsSection, StandardIssue, StandardResult, StandardSchema } from './settings-section.js';
export { lazyConnector } from './lazy-connector.js';
export {
  RedeliveryFilter,
  RememberedIds,
  redeliveryMark,
  retentionCutoff,
  type RedeliveryMark,
  type WrittenIds,
} from './redelivery-filter.js';
export { FailedKeys } from './failed-keys.js';
export { keyHash } from './key-hash.js';
export { pathSegment, subscriptionDir } from './sink-paths.js';
export { quoteIdent, quoteString } from '../duckdb/sql.js';
export { InvalidArgumentError, OrderlyError } from '../core/errors.js';
export type { PubsubMessage } from '../core/message.js';
export type { SubscriptionIdentity } from '../core/pubsub-core.js';
export type { SubscriptionSpec } from '../core/subscription-config.js';
export {
  decodeStoredMessage,
  MessageSchemaError,
  type CurrentTopicSchema,
  type StoredMessageSchema,
  type TopicSchema,
} from '../schema/topic-schema.js';
export type { AvroSchema, CompiledSchema, ProtoSchema, SchemaType } from '../schema/schema-definition.js';
export type { DecodedMessage, Encoding } from '../schema/message-validation.js';
export type { AvroRecord, AvroValue } from '../schema/avro-decoder.js';
export type { AvroType } from '../schema/avro-types.js';
export type { ProtoMapKey, ProtoMessage, ProtoValue } from '../schema/proto-value.js';
export type { SubscriptionState } from '../core/consumer.js';
export type { Logger } from '../log.js';
