import type { JobConfig } from './job-config.js';
import type { RemoteStatus, statusOf } from './metrics.js';
import { readStatus } from './status-endpoint.js';
import { localWorkers } from './worker.js';

type StatusRow = ReturnType<typeof statusOf>[number] | RemoteStatus;

/** One worker's row in `orderly status` of a remote job. */
export type WorkerRow = RemoteStatus | { worker: string; pid: number; note: string };

/**
 * `orderly status` of a job that exports from a remote Pub/Sub: every worker of it running on this
 * machine, each export as that worker sees it (read from the worker's /status). Workers on other machines
 * report on theirs (and to Prometheus, labelled by worker).
 */
export async function fleetStatus(job: JobConfig): Promise<WorkerRow[]> {
  const rows: WorkerRow[] = [];
  for (const { workerId, lock } of localWorkers(job.dataDir)) {
    if (!lock.metrics) {
      rows.push({
        worker: workerId,
        pid: lock.pid,
        note: lock.starting
          ? 'starting; its status is served once it has started'
          : 'running; no metrics endpoint to ask (add metrics: { port: 0 } to the job file)',
      });
      continue;
    }
    try {
      const status = await readStatus<StatusRow[]>(lock.metrics, job.metrics?.authToken);
      rows.push(...status.filter((s): s is RemoteStatus => 'worker' in s));
    } catch (e) {
      rows.push({
        worker: workerId,
        pid: lock.pid,
        note: `running; its status could not be read from ${lock.metrics} (${(e as Error).message})`,
      });
    }
  }
  return rows;
}

/** A worker's row as one line of a table: nested fields folded into text. */
export function flatRow(row: WorkerRow): Record<string, unknown> {
  if (!('source' in row)) return row;
  const { source, lastExportError, lastExportRefusal, exportCounters, ...rest } = row;
  return {
    ...rest,
    source: `${source.location} ${source.state}${source.error ? `: ${source.error}` : ''}`,
    lastExportError: lastExportError?.message,
    lastExportRefusal: lastExportRefusal?.message,
    exportCounters:
      exportCounters &&
      Object.entries(exportCounters)
        .map(([name, n]) => `${name}=${n}`)
        .join(' '),
  };
}
