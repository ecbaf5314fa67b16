import type { AuditResult } from '../connector/capabilities.js';
import { getConnector, registeredConnectors } from '../connector/registry.js';
import { OrderlyError } from '../core/errors.js';
import { exportTargetOf } from './export-target.js';
import type { JobConfig } from './job-config.js';
import type { JobRuntime } from './job-runtime.js';
import { neverHeldStore } from './read-only-scratch.js';
import { findRemoteExport, remoteExportTargets } from './remote-job.js';

/**
 * `orderly audit`: the order audit of one export subscription, by its connector's `audit` capability — an
 * export subscription of the core, or a remote export of a fleet (read from its sink, on any machine).
 */
export async function auditExport(runtime: JobRuntime, subscription: string): Promise<AuditResult> {
  const found = runtime.job.remote ? remoteTarget(runtime, subscription) : coreTarget(runtime, subscription);
  const name = found.target.subscription;
  if (!found.factory.audit) {
    const auditable = registeredConnectors().filter((n) => typeof getConnector(n).audit === 'function');
    throw new OrderlyError(
      'INVALID_ARGUMENT',
      `${name}: its connector "${found.connector}" offers no order audit (connectors that do: ${auditable.join(', ') || 'none'})`,
    );
  }
  return found.factory.audit(found.target);
}

/**
 * Refuses the audit of a job that never ran in its data directory, before anything is opened: its exports'
 * uids and manifests live in the store and beside it, so nothing there was exported, and an empty audit
 * would pass a mistyped `dataDir` as all in order. A fleet's exports are audited from their bucket, from
 * any machine, so a fleet job is never refused here.
 */
export function refuseNeverRan(job: JobConfig): void {
  if (!job.remote && neverHeldStore(job.dataDir))
    throw new OrderlyError(
      'FAILED_PRECONDITION',
      `the data directory ${job.dataDir} holds no Orderly store: the job never ran there, so it exported nothing to audit ` +
        "(check the job file's dataDir, or run the job first)",
    );
}

function coreTarget(runtime: JobRuntime, subscription: string) {
  const sub = runtime.core.getSubscription(subscription);
  const found = exportTargetOf(runtime.core, runtime.connectorSettings, sub);
  if (!found)
    throw new OrderlyError(
      'INVALID_ARGUMENT',
      `${sub.name} is not an export subscription (bigqueryConfig, cloudStorageConfig or exportConfig)`,
    );
  return found;
}

function remoteTarget(runtime: JobRuntime, subscription: string) {
  const name = findRemoteExport(runtime.job, subscription).subscription;
  return remoteExportTargets(runtime.job, runtime.connectorSettings).find((t) => t.target.subscription === name)!;
}
