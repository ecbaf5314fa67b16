import type { PubSubCore } from '../core/pubsub-core.js';
import { checkImmutable, normalizeSubscription } from '../core/subscription-config.js';
import { OrderlyError } from '../core/errors.js';
import type { JobConfig } from './job-config.js';

export interface ReconcileReport {
  created: string[];
  updated: string[];
  unchanged: string[];
}

/**
 * Brings the data directory in line with the job file: creates what is new, updates mutable fields,
 * refuses to change fixed ones (ordering, filter, topic), and never deletes anything.
 */
export async function reconcile(core: PubSubCore, job: JobConfig): Promise<ReconcileReport> {
  const report: ReconcileReport = { created: [], updated: [], unchanged: [] };
  for (const t of job.topics) {
    if (core.hasTopic(t.name)) report.unchanged.push(core.topicName(t.name));
    else report.created.push((await core.createTopic(t.name, { labels: t.labels })).name);
  }
  for (const [i, s] of job.subscriptions.entries()) {
    const { name, ...input } = s;
    if (!core.hasSubscription(name)) {
      report.created.push((await core.createSubscription(name, input)).name);
      continue;
    }
    const current = core.getSubscription(name);
    const wanted = normalizeSubscription(input, (t, field) => core.topicName(t, field));
    try {
      checkImmutable(current, wanted);
    } catch (e) {
      throw new OrderlyError('FAILED_PRECONDITION', `subscriptions[${i}] (${name}): ${(e as Error).message}`);
    }
    // State, not settings: a job file cannot hold them, so comparing them would rewrite every subscription at every start.
    const { state: _state, name: _name, detached: _detached, ...currentSpec } = current;
    if (JSON.stringify(sorted(currentSpec)) === JSON.stringify(sorted(wanted))) report.unchanged.push(current.name);
    else {
      await core.updateSubscription(name, wanted);
      report.updated.push(current.name);
    }
  }
  return report;
}

function sorted(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sorted);
  if (value && typeof value === 'object')
    return Object.fromEntries(
      Object.entries(value)
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([k, v]) => [k, sorted(v)]),
    );
  return value;
}
