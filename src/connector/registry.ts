import { InvalidArgumentError } from '../core/errors.js';
import type { SubscriptionSpec } from '../core/subscription-config.js';
import type { Connector, ConnectorContext } from './connector.js';

/**
 * A connector type. Built-ins and third-party connectors register the same way:
 * `registerConnector({ name, parseConfig, create })`.
 */
export interface ConnectorFactory<Config = unknown> {
  name: string;
  /** Validates the subscription's config section; throw InvalidArgumentError naming the field. */
  parseConfig(raw: unknown): Config;
  create(config: Config, context: ConnectorContext): Connector;
}

const factories = new Map<string, ConnectorFactory<unknown>>();

export function registerConnector<C>(factory: ConnectorFactory<C>): void {
  factories.set(factory.name, factory as ConnectorFactory<unknown>);
}

export function getConnector(name: string): ConnectorFactory<unknown> {
  const f = factories.get(name);
  if (!f) throw new InvalidArgumentError('exportConfig.connector', `no connector named "${name}" (registered: ${[...factories.keys()].join(', ') || 'none'})`);
  return f;
}

export function registeredConnectors(): string[] {
  return [...factories.keys()];
}

/** Pub/Sub's export fields map to the built-ins; `exportConfig.connector` names any registered one. */
export const BUILT_IN_FOR = { bigqueryConfig: 'duckdb-table', cloudStorageConfig: 'object-storage' } as const;

export function exportSection(spec: Pick<SubscriptionSpec, 'bigqueryConfig' | 'cloudStorageConfig' | 'exportConfig'>): { connector: string; field: string; config: unknown } | undefined {
  if (spec.bigqueryConfig) return { connector: BUILT_IN_FOR.bigqueryConfig, field: 'bigqueryConfig', config: spec.bigqueryConfig };
  if (spec.cloudStorageConfig) return { connector: BUILT_IN_FOR.cloudStorageConfig, field: 'cloudStorageConfig', config: spec.cloudStorageConfig };
  if (spec.exportConfig) {
    const { connector, ...config } = spec.exportConfig;
    return { connector, field: 'exportConfig', config };
  }
  return undefined;
}
