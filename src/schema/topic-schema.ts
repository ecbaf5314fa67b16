import { OrderlyError } from '../core/errors.js';
import { decodeMessage, parseEncoding, type DecodedMessage, type Encoding } from './message-validation.js';
import type { CompiledSchema, SchemaType } from './schema-definition.js';

/**
 * A topic's schema as an export sees it (`bigqueryConfig.useTopicSchema`,
 * `cloudStorageConfig.avroConfig.useTopicSchema`): resolved when asked, so it follows UpdateTopic,
 * CommitSchema and DeleteSchemaRevision.
 */
export interface TopicSchema {
  /**
   * What the topic's schemaSettings name now; undefined once they were cleared (or the schema deleted).
   * Its messages published before still name their revision, which `revision` reads them with.
   */
  current?: CurrentTopicSchema;
  /**
   * The schema of any revision of any schema, for the revision a stored message names (its
   * `googclient_schemaname` / `googclient_schemarevisionid`); throws NOT_FOUND once deleted.
   */
  revision(schemaName: string, revisionId: string): CompiledSchema;
}

export interface CurrentTopicSchema {
  /** `projects/P/schemas/S`. */
  schema: string;
  type: SchemaType;
  encoding: Encoding;
  /** The live revisions of the topic's range, oldest first; the last is what a new file or table is laid out by. */
  revisions: { revisionId: string; schema: CompiledSchema }[];
}

/**
 * A stored message cannot be read with its topic's schema: it was published while the topic had no
 * schemaSettings (no `googclient_schemarevisionid`), or its revision was deleted since. The message
 * itself is at fault (an export fails it, and it goes to the dead-letter topic), not the sink.
 */
export class MessageSchemaError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MessageSchemaError';
  }
}

export interface StoredMessageSchema {
  schemaName: string;
  revisionId: string;
  encoding: Encoding;
}

/** The schema revision a stored message was validated against on publish, from the attributes Pub/Sub set. */
export function messageSchemaOf(attributes: Record<string, string>): StoredMessageSchema {
  const schemaName = attributes.googclient_schemaname;
  const revisionId = attributes.googclient_schemarevisionid;
  const encoding = attributes.googclient_schemaencoding;
  if (!schemaName || !revisionId || !encoding) {
    throw new MessageSchemaError(
      'the message has no googclient_schemarevisionid attribute: it was published while the topic had no schemaSettings, so no schema can read it',
    );
  }
  return { schemaName, revisionId, encoding: parseEncoding(encoding, 'googclient_schemaencoding') };
}

/**
 * The topic schema an export was given; a context made without a core gives none, and then no message
 * with a schema can be read (the message fails, as one whose revision is gone does).
 */
export function givenTopicSchema(topic: TopicSchema | undefined): TopicSchema {
  if (!topic)
    throw new MessageSchemaError(
      'this export is given no topic schema (a context without a core), so useTopicSchema cannot read the message',
    );
  return topic;
}

/** Decodes a stored message with the revision it was validated against. Throws MessageSchemaError. */
export function decodeStoredMessage(
  topic: TopicSchema,
  message: { attributes: Record<string, string>; data: Buffer },
): StoredMessageSchema & { schema: CompiledSchema; decoded: DecodedMessage } {
  const which = messageSchemaOf(message.attributes);
  let schema: CompiledSchema;
  try {
    schema = topic.revision(which.schemaName, which.revisionId);
  } catch (e) {
    if (e instanceof OrderlyError && e.code === 'NOT_FOUND') {
      throw new MessageSchemaError(
        `the message's schema revision ${which.schemaName}@${which.revisionId} was deleted, so it cannot be read any more`,
      );
    }
    throw e;
  }
  try {
    return { ...which, schema, decoded: decodeMessage(schema, which.encoding, message.data) };
  } catch (e) {
    // Validated on publish, so only a store edited by hand gets here.
    throw new MessageSchemaError(
      `the message does not match its schema revision ${which.schemaName}@${which.revisionId}: ${(e as Error).message}`,
    );
  }
}
