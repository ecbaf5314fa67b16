import type { TopicSchemaSettings } from '../schema/schema-registry.js';
import { checkRange, parseDuration, type DurationInput } from './duration.js';
import { InvalidArgumentError } from './errors.js';
import { checkLabels } from './labels.js';

/**
 * A topic as a caller describes it (Pub/Sub's field names). `null` clears a setting on update.
 * `schemaSettings` is checked against the schemas (see `SchemaRegistry.checkTopicSettings`).
 */
export interface TopicInput {
  labels?: Record<string, string>;
  messageRetentionDuration?: DurationInput | null;
  schemaSettings?: Record<string, unknown> | null;
}

/** What the store keeps of a topic beyond its name and labels (TopicRecord.settings). Durations in seconds. */
export interface TopicSettings {
  /**
   * Pub/Sub's topic retention: messages stay this long after publishing even when every subscription
   * acked them, so any subscription of the topic can seek back within it.
   */
  messageRetentionDuration?: number;
  schemaSettings?: TopicSchemaSettings;
}

/** Pub/Sub's bounds for a topic's messageRetentionDuration: 10 minutes to 31 days. */
const MIN_RETENTION = 600;
const MAX_RETENTION = 31 * 86400;

/**
 * Applies `input` to `current` (absent fields stay, `null` clears): labels checked, the retention in
 * range, schema settings checked by `checkSchema`.
 */
export function applyTopicInput(
  current: { labels: Record<string, string>; settings: TopicSettings },
  input: TopicInput,
  checkSchema: (value: unknown, field: string) => TopicSchemaSettings,
): { labels: Record<string, string>; settings: TopicSettings } {
  const labels = input.labels === undefined ? current.labels : checkLabels(input.labels);
  const settings: TopicSettings = { ...current.settings };
  if (input.messageRetentionDuration === null) delete settings.messageRetentionDuration;
  else if (input.messageRetentionDuration !== undefined) {
    const field = 'messageRetentionDuration';
    settings.messageRetentionDuration = checkRange(
      field,
      parseDuration(field, input.messageRetentionDuration),
      MIN_RETENTION,
      MAX_RETENTION,
    );
  }
  if (input.schemaSettings === null) delete settings.schemaSettings;
  else if (input.schemaSettings !== undefined) settings.schemaSettings = checkSchema(input.schemaSettings, 'schemaSettings');
  return { labels, settings };
}

/** Stored settings as the core reads them (a store written before topics had settings holds `{}`). */
export function topicSettings(stored: unknown): TopicSettings {
  return stored && typeof stored === 'object' ? stored : {};
}

/** The export field that asks for the topic's schema (`useTopicSchema`), if one does. */
export function topicSchemaField(spec: {
  bigqueryConfig?: Record<string, unknown>;
  cloudStorageConfig?: Record<string, unknown>;
}): string | undefined {
  const avroConfig = spec.cloudStorageConfig?.avroConfig as Record<string, unknown> | undefined;
  if (spec.bigqueryConfig?.useTopicSchema === true) return 'bigqueryConfig.useTopicSchema';
  if (avroConfig?.useTopicSchema === true) return 'cloudStorageConfig.avroConfig.useTopicSchema';
  return undefined;
}

/**
 * An export that writes with the topic's schema (`bigqueryConfig.useTopicSchema`,
 * `cloudStorageConfig.avroConfig.useTopicSchema`) needs a topic that has one: refused otherwise, as
 * Pub/Sub refuses it.
 */
export function checkTopicSchemaUse(
  spec: { bigqueryConfig?: Record<string, unknown>; cloudStorageConfig?: Record<string, unknown> },
  topic: string,
  settings: TopicSettings,
  deletedSchema: string,
): void {
  const field = topicSchemaField(spec);
  if (!field) return;
  if (!settings.schemaSettings)
    throw new InvalidArgumentError(
      field,
      `topic ${topic} has no schema (schemaSettings); give the topic a schema, or leave useTopicSchema unset`,
    );
  if (settings.schemaSettings.schema === deletedSchema)
    throw new InvalidArgumentError(
      field,
      `the schema of topic ${topic} was deleted; give the topic a schema, or leave useTopicSchema unset`,
    );
}
