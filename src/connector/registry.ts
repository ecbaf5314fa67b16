import { InvalidArgumentError, OrderlyError } from '../core/errors.js';
import type { SubscriptionSpec } from '../core/subscription-config.js';
import type { AuditResult, CounterMetric, ExportMemory, ExportTarget, QueryView } from './capabilities.js';
import type { Connector, ConnectorContext } from './connector.js';
import { otherCopyWith, recordRegistration, thisCopy } from './other-copies.js';
import type { SettingsSection } from './settings-section.js';

/**
 * A connector type. Built-ins and third-party connectors register the same way:
 * `registerConnector({ name, parseConfig, create, ...capabilities })`. The command line and the job runtime
 * find everything connector-specific here — settings section, memory, audit, query views, counters — and never
 * import a connector.
 *
 * @typeParam Config the subscription's export section, as `parseConfig` returns it
 * @typeParam Settings the job file settings section, as its schema returns it
 */
export interface ConnectorFactory<Config = unknown, Settings = unknown> {
  /** The name `exportConfig: { connector: <name> }` selects. */
  name: string;
  /** Validates the subscription's config section; throw InvalidArgumentError naming the field. */
  parseConfig(raw: unknown): Config;
  /**
   * Makes a connector for one subscription. Called when its export starts, again for a new connector
   * after an unexpected failure, and when the subscription is created or updated, to refuse what this
   * process cannot run (that connector is never opened nor closed; a subscription being created has the
   * uid ''): so it only checks and keeps its inputs, and opens nothing. Throw InvalidArgumentError for
   * settings it cannot work with. Keep heavy imports out of the module that registers the factory (see
   * `lazyConnector`): commands that only read the job file load it too.
   */
  create(config: Config, context: ConnectorContext): Connector;
  /**
   * Loads the code `create`'s connector runs (what `lazyConnector` loads) without starting anything. A job
   * calls it before its exports start and its endpoint serves: loading compiles modules synchronously, a
   * stall no slicing of the event loop can break up, so it happens while nothing waits on the loop.
   * Without it, the code loads at `open`.
   */
  load?(config: Config): Promise<void>;
  /** The connector's own top-level section of the job file, if it has one. */
  settings?: SettingsSection<Settings>;
  /**
   * Set when subscriptions of this connector cannot run without `settings` in the job file: what they
   * need, as the error names it (`subscriptions[0].bigqueryConfig: needs the job's duckdb.path`).
   */
  requiresSettings?: string;
  /**
   * What its exports run with where the job file's memory section does not say: the same for every export,
   * or by the export's config (as parseConfig returns it; checked as each export is made) when its
   * settings decide what its sink holds, such as a file format encoded in the process.
   */
  memory?: ExportMemory | ((config: Config) => ExportMemory);
  /** Prometheus metrics for the connector's `counters`, by counter name. */
  counters?: Readonly<Record<string, CounterMetric>>;
  /** Checks per-key order of what a subscription exported, read back from the sink (`orderly audit`). */
  audit?(target: ExportTarget<Config>): Promise<AuditResult>;
  /** A DuckDB view over what a subscription exported (`orderly query`); undefined when there is none. */
  queryView?(target: ExportTarget<Config>): Promise<QueryView | undefined>;
}

const factories = new Map<string, ConnectorFactory>();

/**
 * Registers a connector type under its name (importing the module that calls this is the registration).
 * Registering the same factory again does nothing; another factory under a taken name, or a settings
 * section key that another connector declares with another section, is an error.
 */
export function registerConnector<C, S = unknown>(factory: ConnectorFactory<C, S>): void {
  const known = factories.get(factory.name);
  if (known === (factory as ConnectorFactory)) return;
  if (!/^[a-z0-9][a-z0-9._-]*$/.test(factory.name)) {
    throw new InvalidArgumentError(
      'connector name',
      `must be lowercase letters, digits, ".", "_" and "-", got ${JSON.stringify(factory.name)}`,
    );
  }
  if (known) throw new OrderlyError('ALREADY_EXISTS', `a different connector is already registered as "${factory.name}"`);
  if (typeof factory.memory !== 'function') checkMemory(factory.name, factory.memory);
  const section = factory.settings;
  for (const other of factories.values()) {
    if (section && other.settings && other.settings.key === section.key && other.settings !== (section as SettingsSection)) {
      throw new OrderlyError(
        'ALREADY_EXISTS',
        `connector "${factory.name}": the job file section "${section.key}" belongs to connector "${other.name}"`,
      );
    }
  }
  factories.set(factory.name, factory as ConnectorFactory);
  recordRegistration(factory.name);
}

/** Each setting of a connector's ExportMemory within what the job file's memory section accepts for it. */
function checkMemory(connector: string, memory: ExportMemory | undefined): void {
  const ranges = { windowMessages: [100, 10_000_000], exportMessages: [100, 10_000_000], heapGrowthPercent: [10, 300] } as const;
  for (const [field, [min, max]] of Object.entries(ranges)) {
    const value = memory?.[field as keyof ExportMemory];
    if (value === undefined) continue;
    if (!Number.isInteger(value) || value < min || value > max)
      throw new InvalidArgumentError(`connector "${connector}": memory.${field}`, `an integer from ${min} to ${max}, got ${String(value)}`);
  }
}

/** The factory registered under `name`, or an InvalidArgumentError listing the registered ones. */
export function getConnector(name: string): ConnectorFactory {
  const f = factories.get(name);
  if (f) return f;
  const other = otherCopyWith(name);
  if (other !== undefined) {
    throw new InvalidArgumentError(
      'exportConfig.connector',
      `connector "${name}" was registered into another copy of Orderly (${other}) than the one running (${thisCopy}): ` +
        'its plugin imports the orderly of its own node_modules; run that one (npx orderly in the project that depends on it)',
    );
  }
  throw new InvalidArgumentError(
    'exportConfig.connector',
    `no connector named "${name}" (registered: ${[...factories.keys()].join(', ') || 'none'}; ` +
      "a connector of another package is there once the job file's plugins: lists it)",
  );
}

/** The registered connectors' names, in registration order. */
export function registeredConnectors(): string[] {
  return [...factories.keys()];
}

/** The job file sections the registered connectors declare (each once), in registration order. */
export function settingsSections(): SettingsSection[] {
  return [...new Set([...factories.values()].flatMap((f) => (f.settings ? [f.settings] : [])))];
}

/**
 * Every counter metric the registered connectors declare, each once, with the counter that feeds it per
 * connector (connectors may report one metric from counters of different names).
 */
export function counterMetrics(): (CounterMetric & { counterOf: Record<string, string> })[] {
  const byMetric = new Map<string, CounterMetric & { counterOf: Record<string, string> }>();
  for (const f of factories.values()) {
    for (const [counter, { metric, help }] of Object.entries(f.counters ?? {})) {
      const entry = byMetric.get(metric) ?? { metric, help, counterOf: {} };
      entry.counterOf[f.name] = counter;
      byMetric.set(metric, entry);
    }
  }
  return [...byMetric.values()];
}

/** Pub/Sub's export fields map to the built-ins; `exportConfig.connector` names any registered one. */
export const BUILT_IN_FOR = { bigqueryConfig: 'duckdb-table', cloudStorageConfig: 'object-storage' } as const;

/** The subscription's export section: which connector runs it, the field it came from, and its config. */
export function exportSection(
  spec: Pick<SubscriptionSpec, 'bigqueryConfig' | 'cloudStorageConfig' | 'exportConfig'>,
): { connector: string; field: string; config: unknown } | undefined {
  if (spec.bigqueryConfig) return { connector: BUILT_IN_FOR.bigqueryConfig, field: 'bigqueryConfig', config: spec.bigqueryConfig };
  if (spec.cloudStorageConfig)
    return { connector: BUILT_IN_FOR.cloudStorageConfig, field: 'cloudStorageConfig', config: spec.cloudStorageConfig };
  if (spec.exportConfig) {
    const { connector, ...config } = spec.exportConfig;
    return { connector, field: 'exportConfig', config };
  }
  return undefined;
}

/**
 * The window a subscription's export reads ahead with, as its connector declares it (ExportMemory.windowMessages);
 * undefined for a subscription that exports nothing, or through a connector that declares none.
 */
export function declaredWindow(spec: Pick<SubscriptionSpec, 'bigqueryConfig' | 'cloudStorageConfig' | 'exportConfig'>): number | undefined {
  const section = exportSection(spec);
  return section && declaredMemory(section).windowMessages;
}

/**
 * What the export section's connector declares its exports run with: nothing for a connector not registered,
 * nor for a config it refuses (stored before it could refuse it), whose export fails with the connector's
 * reason where it is made (ExportManager) instead of failing the store's open or every other export with it.
 */
export function declaredMemory(section: { connector: string; config: unknown }): ExportMemory {
  const factory = factories.get(section.connector);
  if (!factory) return {};
  if (typeof factory.memory !== 'function') return factory.memory ?? {};
  let config: unknown;
  try {
    config = factory.parseConfig(section.config);
  } catch {
    return {};
  }
  return memoryOf(factory, config);
}

/** What `factory` declares an export of `config` (parsed) runs with; a declaration by config out of range is an InvalidArgumentError. */
export function memoryOf(factory: ConnectorFactory, config: unknown): ExportMemory {
  if (typeof factory.memory !== 'function') return factory.memory ?? {};
  const memory = factory.memory(config);
  checkMemory(factory.name, memory);
  return memory;
}
