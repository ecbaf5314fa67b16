import { DELETED_TOPIC, type PubSubCore } from '../core/pubsub-core.js';
import {
  CLEARED_SECTIONS,
  checkImmutable,
  normalizeSubscription,
  type SubscriptionInput,
  type SubscriptionSpec,
} from '../core/subscription-config.js';
import { checkTopicSchemaUse, type TopicSettings } from '../core/topic-config.js';
import { FailedPreconditionError, InvalidArgumentError } from '../core/errors.js';
import { compileSchema } from '../schema/schema-definition.js';
import { DELETED_SCHEMA, parseSchemaName } from '../schema/schema-name.js';
import type { TopicSchemaSettings } from '../schema/schema-registry.js';
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
 * never deletes anything. A refused file changes nothing: every entry is checked
 * against the data directory before the first change, and all refusals are reported at once, naming the
 * file. Applied entry by entry, a refusal at a later entry left the topics and subscriptions before it
 * created for good, and such a subscription went on receiving messages and exporting them once the file
 * was put back, into the same table or bucket as the one it was meant to replace.
 */
export async function reconcile(core: PubSubCore, job: JobConfig): Promise<ReconcileReport> {
  const plan = planChanges(core, job);
  const report: ReconcileReport = { created: [], updated: [], unchanged: [], notInFile: [] };
  // Before the topics, whose schemaSettings name them. A commit the registry refuses (incompatible with
  // the earlier revisions) is only found here: only schemas listed before it have changed then.
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
  const listed = new Set<string>();
  for (const step of plan) {
    if (step.kind === 'create') {
      const created = await inFile(job, step.at, () => core.createSubscription(step.name, step.input));
      report.created.push(created.name);
      listed.add(created.name);
    } else {
      listed.add(step.current);
      if (step.kind === 'unchanged') report.unchanged.push(step.current);
      else {
        // The file states the subscription whole: a policy or export section it leaves out is cleared.
        await inFile(job, step.at, () => core.updateSubscription(step.name, { ...CLEARED_SECTIONS, ...step.wanted }));
        report.updated.push(step.current);
      }
    }
  }
  report.notInFile = core
    .allSubscriptions()
    .map((s) => s.name)
    .filter((name) => !listed.has(name));
  return report;
}

type SubscriptionStep = { at: string; name: string } & (
  | { kind: 'create'; input: SubscriptionInput }
  | { kind: 'update'; current: string; wanted: SubscriptionSpec }
  | { kind: 'unchanged'; current: string }
);

/**
 * What reconcile will do to each subscription of the file, once every entry has passed what the data
 * directory refuses: a schema's type changed, a change to a fixed field, a subscription whose topic was
 * deleted, an export that writes with its topic's schema on a topic that will have none. Throws them all
 * at once, naming the file.
 */
function planChanges(core: PubSubCore, job: JobConfig): SubscriptionStep[] {
  const problems: string[] = [];
  for (const [i, s] of job.schemas.entries()) {
    const name = jobSchemaName(s.name, core.projectId, 'name');
    const type = core.schemas.has(name) ? core.schemas.get(name, 'BASIC').type : s.type;
    if (type !== s.type)
      problems.push(
        `schemas[${i}] (${name}): the data directory's schema is ${type}, and a schema's type cannot change; give this entry another name`,
      );
  }
  // A topic's schema settings as they will be once the file's topics are applied.
  const fileSchemas = new Map<string, TopicSchemaSettings>();
  for (const t of job.topics) {
    const schemaSettings = jobTopicInput(t, core.projectId).schemaSettings;
    if (schemaSettings) fileSchemas.set(core.topicName(t.name), schemaSettings as unknown as TopicSchemaSettings);
  }
  const topicSettings = (topic: string): TopicSettings => {
    const fromFile = fileSchemas.get(topic);
    if (fromFile) return { schemaSettings: fromFile };
    return core.hasTopic(topic) ? core.getTopic(topic) : {};
  };
  const steps: SubscriptionStep[] = [];
  for (const [i, s] of job.subscriptions.entries()) {
    const { name, ...input } = s;
    const at = `subscriptions[${i}]`;
    try {
      const step = planSubscription(core, job, at, name, input, topicSettings);
      if (step) steps.push(step);
    } catch (e) {
      if (e instanceof InvalidArgumentError) problems.push(`${at}.${e.message}`);
      else if (e instanceof FailedPreconditionError) problems.push(`${at} (${name}): ${e.message}`);
      else throw e;
    }
  }
  if (problems.length) throw new JobConfigError(job.file, problems);
  return steps;
}

function planSubscription(
  core: PubSubCore,
  job: JobConfig,
  at: string,
  name: string,
  input: SubscriptionInput,
  topicSettings: (topic: string) => TopicSettings,
): SubscriptionStep {
  if (!core.hasSubscription(name)) {
    const spec = normalizeSubscription(input, (t, field) => core.topicName(t, field));
    checkTopicSchemaUse(spec, spec.topic, topicSettings(spec.topic), DELETED_SCHEMA);
    return { kind: 'create', at, name, input };
  }
  const current = core.getSubscription(name);
  if (current.topic === DELETED_TOPIC) {
    throw new FailedPreconditionError(
      `its topic was deleted while it existed (through the API), which leaves it without a topic for good, as in Pub/Sub; delete the subscription (DELETE through \`orderly serve --data-dir ${job.dataDir}\`, which reads no job file) or give this entry another name`,
    );
  }
  const wanted = normalizeSubscription(input, (t, field) => core.topicName(t, field), { existing: current });
  checkImmutable(current, wanted);
  // State, not settings (the topic's retention is the topic's): a job file cannot hold them, so comparing
  // them would rewrite every subscription at every start.
  const { state: _state, name: _name, detached: _detached, topicMessageRetentionDuration: _topicRetention, ...currentSpec } = current;
  if (JSON.stringify(sorted(currentSpec)) === JSON.stringify(sorted(wanted))) return { kind: 'unchanged', at, name, current: current.name };
  checkTopicSchemaUse(wanted, wanted.topic, topicSettings(wanted.topic), DELETED_SCHEMA);
  return { kind: 'update', at, name, current: current.name, wanted };
}

/**
 * A `schemas` entry: created when missing; when its newest revision's definition is not the file's, the
 * file's is committed as a new revision (refused, naming the entry, when incompatible with the earlier
 * ones, as CommitSchema refuses it). Its type was checked by planChanges.
 */
async function reconcileSchema(core: PubSubCore, job: JobConfig, i: number, s: JobSchema, report: ReconcileReport): Promise<void> {
  const at = `schemas[${i}]`;
  const name = jobSchemaName(s.name, core.projectId, 'name');
  const schema = { type: s.type, definition: s.definition };
  if (!core.schemas.has(name)) {
    const { project, id } = parseSchemaName(name, 'name');
    await inFile(job, at, () => core.schemas.create({ parent: `projects/${project}`, schemaId: id, schema }));
    report.created.push(name);
  } else if (core.schemas.get(name, 'FULL').definition === compileSchema(s.type, s.definition).definition) report.unchanged.push(name);
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
