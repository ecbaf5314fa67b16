import type { AuditResult } from '../connector/capabilities.js';
import { getConnector, registeredConnectors } from '../connector/registry.js';
import { OrderlyError } from '../core/errors.js';
import { exportTargetOf } from './export-target.js';
import type { JobRuntime } from './job-runtime.js';

/** `orderly audit`: the order audit of one export subscription, by its connector's `audit` capability. */
export async function auditExport(runtime: JobRuntime, subscription: string): Promise<AuditResult> {
  const sub = runtime.core.getSubscription(subscription);
  const found = exportTargetOf(runtime.core, runtime.connectorSettings, sub);
  if (!found) throw new OrderlyError('INVALID_ARGUMENT', `${sub.name} is not an export subscription (bigqueryConfig, cloudStorageConfig or exportConfig)`);
  if (!found.factory.audit) {
    const auditable = registeredConnectors().filter((name) => typeof getConnector(name).audit === 'function');
    throw new OrderlyError('INVALID_ARGUMENT', `${sub.name}: its connector "${found.connector}" offers no order audit (connectors that do: ${auditable.join(', ') || 'none'})`);
  }
  return found.factory.audit(found.target);
}
