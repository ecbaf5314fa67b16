import { DELETED_TOPIC, type PubSubCore } from '../core/pubsub-core.js';
import { CLEARED_SECTIONS, checkImmutable, normalizeSubscription } from '../core/subscription-config.js';
import { InvalidArgumentError, OrderlyError } from '../core/errors.js';
import { compileSchema } from '../schema/schema-definition.js';
import { parseSchemaName } from '../schema/schema-name.js';
import { JobConfigError, jobTopicInput, jobTopicSettings, type JobConfig } from './job-config.js';
import { jobSchemaName, type JobSchema } from './job-schemas.js';

export interface ReconcileReport {
  created: string[];
  updated: string[];
  unchanged: string[];
  /**
   * Subscriptions of the data directory the file does not list (removed or renamed in it, or created
   * through the API): never deleted, they go on receiving messages and exporting, which the log says.
   */
  notInFile: string[];
}

/**
 * Brings the data directory in line with the job file: creates what is new, updates mutable fields (a
 * schema's definition, as a new revision; a topic's labels, retention and schema settings; a
 * subscription's settings), refuses to change fixed ones (a schema's type; ordering, filter, topic), and
 * never deletes anything.
 */
export async function reconcile(core: PubSubCore, job: JobConfig): Promise<ReconcileReport> {
  const report: ReconcileReport = { created: [], updated: [], unchanged: [], notInFile: [] };
  const listed = new Set<string>();
  // Before the topics, whose schemaSettings name them.
  for (const [i, s] of job.schemas.entries()) await reconcileSchema(core, job, i, s, report);
  for (const [i, t] of job.topics.entries()) {
    const at = `topics[${i}]`;
    const input = jobTopicInput(t, core.projectId);
    if (!core.hasTopic(t.name)) {
      report.created.push((await inFile(job, at, () => core.createTopic(t.name, input))).name);
      continue;
    }
    const current = core.getTopic(t.name);
    const wanted = jobTopicSettings(t);
    const wantedSchema = input.schemaSettings && (await inFile(job, at, async () => core.schemas.checkTopicSettings(input.schemaSettings)));
    const same =
      JSON.stringify(sorted(current.labels)) === JSON.stringify(sorted(wanted.labels)) &&
      current.messageRetentionDuration === wanted.messageRetentionDuration &&
      (!wantedSchema || JSON.stringify(sorted(current.schemaSettings)) === JSON.stringify(sorted(wantedSchema)));
    if (same) report.unchanged.push(current.name);
    else {
      await inFile(job, at, () => core.updateTopic(t.name, input));
      report.updated.push(current.name);
    }
  }
  for (const [i, s] of job.subscriptions.entries()) {
    const { name, ...input } = s;
    const at = `subscriptions[${i}]`;
    if (!core.hasSubscription(name)) {
      const created = await inFile(job, at, () => core.createSubscription(name, input));
      report.created.push(created.name);
      listed.add(created.name);
      continue;
    }
    const current = core.getSubscription(name);
    listed.add(current.name);
    if (current.topic === DELETED_TOPIC) {
      throw new OrderlyError(
        'FAILED_PRECONDITION',
        `${at} (${name}): its topic was deleted while it existed (through the API), which leaves it without a topic for good, as in Pub/Sub; delete the subscription (DELETE through \`orderly serve --data-dir ${job.dataDir}\`, which reads no job file) or give this entry another name`,
      );
    }
    const wanted = normalizeSubscription(input, (t, field) => core.topicName(t, field), { existing: current });
    try {
      checkImmutable(current, wanted);
    } catch (e) {
      throw new OrderlyError('FAILED_PRECONDITION', `${at} (${name}): ${(e as Error).message}`);
    }
    // State, not settings (the topic's retention is the topic's): a job file cannot hold them, so comparing
    // them would rewrite every subscription at every start.
    const { state: _state, name: _name, detached: _detached, topicMessageRetentionDuration: _topicRetention, ...currentSpec } = current;
    if (JSON.stringify(sorted(currentSpec)) === JSON.stringify(sorted(wanted))) report.unchanged.push(current.name);
    else {
      // The file states the subscription whole: a policy or export section it leaves out is cleared.
      await inFile(job, at, () => core.updateSubscription(name, { ...CLEARED_SECTIONS, ...wanted }));
      report.updated.push(current.name);
    }
  }
  report.notInFile = core
    .allSubscriptions()
    .map((s) => s.name)
    .filter((name) => !listed.has(name));
  return report;
}

/**
 * A `schemas` entry: created when missing; when its newest revision's definition is not the file's, the
 * file's is committed as a new revision (refused, naming the entry, when incompatible with the earlier
 * ones, as CommitSchema refuses it). A schema's type cannot change.
 */
async function reconcileSchema(core: PubSubCore, job: JobConfig, i: number, s: JobSchema, report: ReconcileReport): Promise<void> {
  const at = `schemas[${i}]`;
  const name = jobSchemaName(s.name, core.projectId, 'name');
  const schema = { type: s.type, definition: s.definition };
  if (!core.schemas.has(name)) {
    const { project, id } = parseSchemaName(name, 'name');
    await inFile(job, at, () => core.schemas.create({ parent: `projects/${project}`, schemaId: id, schema }));
    report.created.push(name);
    return;
  }
  const current = core.schemas.get(name, 'FULL');
  if (current.type !== s.type)
    throw new OrderlyError(
      'FAILED_PRECONDITION',
      `${at} (${name}): the data directory's schema is ${current.type}, and a schema's type cannot change; give this entry another name`,
    );
  if (current.definition === compileSchema(s.type, s.definition).definition) report.unchanged.push(name);
  else {
    await inFile(job, at, () => core.schemas.commit({ name, schema }));
    report.updated.push(name);
  }
}

/**
 * What the core refuses only when it sees the data directory (a subscription writing with its topic's
 * schema, on a topic the API left without one) is a problem of the job file all the same: reported as
 * `orderly validate` reports one, with the file and the entry's place in it.
 */
async function inFile<T>(job: JobConfig, at: string, change: () => Promise<T>): Promise<T> {
  try {
    return await change();
  } catch (e) {
    if (e instanceof InvalidArgumentError) throw new JobConfigError(job.file, [`${at}.${e.message}`]);
    throw e;
  }
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
