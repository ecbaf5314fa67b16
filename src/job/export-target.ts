import type { ExportTarget } from '../connector/capabilities.js';
import type { ConnectorSettings } from '../connector/connector.js';
import { exportSection, getConnector, type ConnectorFactory } from '../connector/registry.js';
import type { PubSubCore, Subscription } from '../core/pubsub-core.js';

/** An export subscription's connector factory (from the registry) and what its capabilities are given. */
export function exportTargetOf(
  core: PubSubCore,
  settings: ConnectorSettings,
  sub: Subscription,
): { factory: ConnectorFactory; target: ExportTarget; connector: string } | undefined {
  const section = exportSection(sub);
  if (!section) return undefined;
  const factory = getConnector(section.connector);
  return {
    factory,
    connector: section.connector,
    target: {
      subscription: sub.name,
      identity: core.identity(sub.name),
      config: factory.parseConfig(section.config),
      settings,
      ...(sub.filter ? { filter: sub.filter } : {}),
    },
  };
}
