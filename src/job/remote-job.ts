import type { ExportTarget } from '../connector/capabilities.js';
import type { ConnectorSettings } from '../connector/connector.js';
import type { RemoteExports } from '../connector/export-manager.js';
import { exportSection, getConnector, type ConnectorFactory } from '../connector/registry.js';
import { remoteIdentity, remoteSubscriptionName } from '../connector/sources/remote-names.js';
import type { SubscriptionIdentity } from '../core/pubsub-core.js';
import { OrderlyError } from '../core/errors.js';
import type { JobConfig } from './job-config.js';

/** The job's `remote:` section as the export manager takes it. */
export function remoteExportsOf(job: JobConfig, workerId: string): RemoteExports {
  const remote = job.remote!;
  return {
    endpoint: remote.endpoint,
    projectId: remote.projectId ?? job.projectId,
    authToken: remote.authToken,
    workerId,
    maxExtensionMinutes: remote.maxExtensionMinutes,
    streams: remote.streams,
    idleFlushSeconds: remote.idleFlushSeconds,
    exports: remote.exports.map(({ subscription, enableMessageOrdering, bigqueryConfig, cloudStorageConfig, exportConfig }) => ({
      subscription,
      enableMessageOrdering,
      section: { bigqueryConfig, cloudStorageConfig, exportConfig },
    })),
  };
}

/** A remote export of the job by its subscription (bare id or full name), with the identity its sinks keep progress under. */
export function findRemoteExport(
  job: JobConfig,
  ref: string,
): { subscription: string; identity: SubscriptionIdentity; export: NonNullable<JobConfig['remote']>['exports'][number] } {
  const projectId = job.remote?.projectId ?? job.projectId;
  const wanted = remoteSubscriptionName(ref, projectId);
  const found = job.remote?.exports.find((e) => remoteSubscriptionName(e.subscription, projectId) === wanted);
  if (!found) {
    const known = job.remote?.exports.map((e) => remoteSubscriptionName(e.subscription, projectId)).join(', ') || 'none';
    throw new OrderlyError('NOT_FOUND', `no remote export of ${wanted} in ${job.file} (remote.exports: ${known})`);
  }
  return { subscription: wanted, identity: remoteIdentity(wanted), export: found };
}

/** The job's remote exports as connector capabilities (audit, query views) see them: shared by the fleet. */
export function remoteExportTargets(
  job: JobConfig,
  settings: ConnectorSettings,
): { factory: ConnectorFactory; connector: string; target: ExportTarget }[] {
  return (job.remote?.exports ?? []).map((e) => {
    const { subscription, identity } = findRemoteExport(job, e.subscription);
    const section = exportSection(e)!;
    const factory = getConnector(section.connector);
    return {
      factory,
      connector: section.connector,
      target: {
        subscription,
        identity,
        config: factory.parseConfig(section.config),
        settings,
        shared: true,
        ...(e.enableMessageOrdering ? {} : { unordered: true }),
      },
    };
  });
}
