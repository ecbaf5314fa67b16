import { randomBytes } from 'node:crypto';
import { systemClock, type Clock } from '../core/clock.js';
import { AlreadyExistsError, FailedPreconditionError, InvalidArgumentError, NotFoundError, OrderlyError } from '../core/errors.js';
import {
  decodeMessage,
  messageSchemaError,
  parseEncoding,
  schemaAttributes,
  validateAgainstRevisions,
  type DecodedMessage,
  type Encoding,
} from './message-validation.js';
import { pageOf, type PageRequest } from '../core/paging.js';
import { incompatibility } from './schema-compatibility.js';
import { compileSchema, parseSchemaType, type CompiledSchema, type SchemaType } from './schema-definition.js';
import { DELETED_SCHEMA, checkSchemaId, parseProjectParent, parseSchemaName } from './schema-name.js';
import { SchemaViolationError } from './schema-violation.js';

/**
 * Pub/Sub's SchemaService as an in-memory model, independent of storage and transport.
 *
 * Persistence hook — the whole contract with a store:
 * - State is a set of plain `SchemaRecord`s (JSON-safe: strings and arrays only). A record holds a
 *   schema's name, type and every revision in creation order; a deleted revision stays as a tombstone
 *   (id and time, no definition) so a topic's `firstRevisionId`/`lastRevisionId` keep their place.
 * - `new SchemaRegistry({ records })` starts from the records a store loaded.
 * - Every mutation calls `persist(change)` once, with `{kind: 'put', record}` (the schema's complete new
 *   record) or `{kind: 'delete', name}`, and applies the change in memory only after `persist`
 *   resolves; if it rejects, the mutation fails and nothing changes. Mutations run one at a time, in
 *   call order, so the store sees them in the order they took effect.
 * - After `delete(name)` resolves, the caller must set `schemaSettings.schema` of every topic that
 *   names the schema to `DELETED_SCHEMA` (Pub/Sub's `_deleted-schema_`); publishing to such a topic then
 *   fails (`validateForTopic`).
 *
 * Rules (as Pub/Sub): ids as for every resource; at most 10,000 schemas per project and 20 live
 * revisions per schema; revision ids are 8 random hex digits; a commit must be compatible with every
 * live revision (schema-compatibility); rollback adds a revision copying an older one; the only
 * revision cannot be deleted; `name@revisionId` addresses a revision; GetSchema defaults to the FULL
 * view, the List calls to BASIC (no definition); revisions list newest first.
 */
export interface SchemaRevisionRecord {
  revisionId: string;
  /** RFC 3339, UTC. */
  revisionCreateTime: string;
  /** Absent once the revision is deleted. */
  definition?: string;
}

export interface SchemaRecord {
  /** `projects/P/schemas/S`. */
  name: string;
  type: SchemaType;
  /** Oldest first, deleted revisions included. */
  revisions: SchemaRevisionRecord[];
}

export type SchemaChange = { kind: 'put'; record: SchemaRecord } | { kind: 'delete'; name: string };

export interface SchemaRegistryOptions {
  records?: Iterable<SchemaRecord>;
  persist?: (change: SchemaChange) => void | Promise<void>;
  clock?: Clock;
  /** Revision ids; random 8 hex digits unless a test fixes them. */
  newRevisionId?: () => string;
}

/** The API's `Schema` message. */
export interface SchemaResource {
  name: string;
  type: SchemaType;
  /** Only in the FULL view. */
  definition?: string;
  revisionId: string;
  revisionCreateTime: string;
}

export type SchemaView = 'BASIC' | 'FULL';

/** A topic's `schemaSettings`, checked (see `checkTopicSettings`). */
export interface TopicSchemaSettings {
  schema: string;
  encoding: Encoding;
  firstRevisionId?: string;
  lastRevisionId?: string;
}

export interface TopicValidation {
  revisionId: string;
  decoded: DecodedMessage;
  /** `googclient_schemaname`, `googclient_schemarevisionid`, `googclient_schemaencoding`. */
  attributes: Record<string, string>;
}

export const MAX_REVISIONS = 20;
export const MAX_SCHEMAS_PER_PROJECT = 10_000;

type Fields = Record<string, unknown>;

export class SchemaRegistry {
  private readonly schemas = new Map<string, SchemaRecord>();
  private readonly persist: (change: SchemaChange) => void | Promise<void>;
  private readonly clock: Clock;
  private readonly newRevisionId: () => string;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(options: SchemaRegistryOptions = {}) {
    for (const record of options.records ?? []) this.schemas.set(record.name, copy(record));
    this.persist = options.persist ?? (() => undefined);
    this.clock = options.clock ?? systemClock;
    this.newRevisionId = options.newRevisionId ?? (() => randomBytes(4).toString('hex'));
  }

  /** Copies of every record (e.g. for a store's snapshot). */
  records(): SchemaRecord[] {
    return [...this.schemas.values()].map(copy);
  }

  get(name: unknown, view: unknown = 'FULL'): SchemaResource {
    const ref = parseSchemaName(name, 'name', true);
    const record = this.record(ref.name);
    return resource(record, this.revision(record, ref.revisionId), parseView(view, 'FULL'));
  }

  list(request: { parent: unknown; view?: unknown } & PageRequest): { schemas: SchemaResource[]; nextPageToken: string } {
    const project = parseProjectParent(request.parent);
    const view = parseView(request.view, 'BASIC');
    const prefix = `projects/${project}/schemas/`;
    const records = [...this.schemas.values()].filter((r) => r.name.startsWith(prefix)).sort((a, b) => (a.name < b.name ? -1 : 1));
    const page = pageOf(records, request, (r) => r.name, 'ascending', `schemas of projects/${project}`);
    return { schemas: page.items.map((r) => resource(r, latest(r), view)), nextPageToken: page.nextPageToken };
  }

  listRevisions(request: { name: unknown; view?: unknown } & PageRequest): { schemas: SchemaResource[]; nextPageToken: string } {
    const record = this.record(parseSchemaName(request.name, 'name').name);
    const view = parseView(request.view, 'BASIC');
    // The key is the revision's place in the history, which never changes (deleted ones keep theirs).
    const live = record.revisions
      .map((r, i) => ({ r, key: String(i).padStart(6, '0') }))
      .filter((x) => x.r.definition !== undefined)
      .reverse();
    const page = pageOf(live, request, (x) => x.key, 'descending', `revisions of ${record.name}`);
    return { schemas: page.items.map((x) => resource(record, x.r, view)), nextPageToken: page.nextPageToken };
  }

  validateSchema(request: { parent: unknown; schema: unknown }): void {
    parseProjectParent(request.parent);
    const schema = fields(request.schema, 'schema');
    compileSchema(schema.type, schema.definition);
  }

  /** ValidateMessage: by `name` (optionally `name@revisionId`, else the latest revision) or an inline `schema`. */
  validateMessage(request: { parent: unknown; name?: unknown; schema?: unknown; message?: unknown; encoding: unknown }): DecodedMessage {
    parseProjectParent(request.parent);
    const byName = request.name !== undefined && request.name !== '';
    if (byName === (request.schema !== undefined && request.schema !== null)) {
      throw new InvalidArgumentError(
        byName ? 'schema' : 'name',
        'give exactly one of name (an existing schema) and schema (an inline definition)',
      );
    }
    let compiled: CompiledSchema;
    if (byName) {
      const ref = parseSchemaName(request.name, 'name', true);
      const record = this.record(ref.name);
      compiled = compileSchema(record.type, this.revision(record, ref.revisionId).definition);
    } else {
      const schema = fields(request.schema, 'schema');
      compiled = compileSchema(schema.type, schema.definition);
    }
    const encoding = parseEncoding(request.encoding, 'encoding');
    const data = request.message === undefined ? Buffer.alloc(0) : request.message;
    if (!(data instanceof Uint8Array)) throw new InvalidArgumentError('message', 'must be bytes');
    try {
      return decodeMessage(compiled, encoding, Buffer.from(data.buffer, data.byteOffset, data.byteLength));
    } catch (e) {
      throw e instanceof SchemaViolationError ? e.on('message') : e;
    }
  }

  /**
   * Checks a topic's `schemaSettings` on CreateTopic/UpdateTopic: the schema exists, the encoding is JSON
   * or BINARY (Pub/Sub refuses an unspecified one), and the revision range names live revisions in order.
   */
  checkTopicSettings(value: unknown, field = 'schemaSettings'): TopicSchemaSettings {
    const settings = fields(value, field);
    const name = parseSchemaName(settings.schema, `${field}.schema`).name;
    const record = this.schemas.get(name);
    if (!record) throw new NotFoundError('Schema', name);
    const encoding = parseEncoding(settings.encoding, `${field}.encoding`);
    const position = (key: 'firstRevisionId' | 'lastRevisionId'): number | undefined => {
      const id = settings[key];
      if (id === undefined || id === '') return undefined;
      const i = record.revisions.findIndex((r) => r.revisionId === id && r.definition !== undefined);
      if (i < 0) throw new InvalidArgumentError(`${field}.${key}`, `schema ${name} has no revision ${JSON.stringify(id)}`);
      return i;
    };
    const first = position('firstRevisionId');
    const last = position('lastRevisionId');
    if (first !== undefined && last !== undefined && first > last) {
      throw new InvalidArgumentError(
        `${field}.firstRevisionId`,
        `revision ${String(settings.firstRevisionId)} is newer than lastRevisionId ${String(settings.lastRevisionId)}`,
      );
    }
    const result: TopicSchemaSettings = { schema: name, encoding };
    if (first !== undefined) result.firstRevisionId = String(settings.firstRevisionId);
    if (last !== undefined) result.lastRevisionId = String(settings.lastRevisionId);
    return result;
  }

  /**
   * Validates message `index` of a publish to a topic with these settings: the first revision in range
   * (newest first) that accepts the data, its decoded value and the attributes to add. A message that
   * does not conform is INVALID_ARGUMENT on `messages[index].data`; a topic whose schema was deleted is
   * NOT_FOUND, as Pub/Sub answers.
   */
  validateForTopic(settings: TopicSchemaSettings, data: Buffer, index = 0): TopicValidation {
    const record = settings.schema === DELETED_SCHEMA ? undefined : this.schemas.get(settings.schema);
    if (!record) {
      throw new OrderlyError(
        'NOT_FOUND',
        `the topic's schema was deleted (schemaSettings.schema is ${DELETED_SCHEMA}); publishing needs new schemaSettings`,
      );
    }
    try {
      const match = validateAgainstRevisions(record.type, record.revisions, settings, settings.encoding, data);
      return { ...match, attributes: schemaAttributes(record.name, match.revisionId, settings.encoding) };
    } catch (e) {
      throw e instanceof SchemaViolationError ? messageSchemaError(index, e) : e;
    }
  }

  /**
   * The schema of one revision, to decode a stored message by its `googclient_schemarevisionid` (the
   * exports do). A deleted revision is NOT_FOUND: Pub/Sub cannot write such messages with the topic's
   * schema either.
   */
  compiledRevision(name: string, revisionId: string): CompiledSchema {
    const record = this.record(name);
    return compileSchema(record.type, this.revision(record, revisionId).definition);
  }

  /**
   * The live revisions a topic with these settings accepts, oldest first (what an export writes with).
   * Empty when the schema was deleted or no revision of the range is left.
   */
  revisionsInRange(settings: TopicSchemaSettings): { revisionId: string; schema: CompiledSchema }[] {
    const record = this.schemas.get(settings.schema);
    if (!record) return [];
    const at = (id: string | undefined, fallback: number) => (id ? record.revisions.findIndex((r) => r.revisionId === id) : fallback);
    const from = at(settings.firstRevisionId, 0);
    const to = at(settings.lastRevisionId, record.revisions.length - 1);
    if (from < 0 || to < 0) return [];
    return record.revisions
      .slice(from, to + 1)
      .filter((r) => r.definition !== undefined)
      .map((r) => ({ revisionId: r.revisionId, schema: compileSchema(record.type, r.definition) }));
  }

  /** Whether a schema of this name exists. */
  has(name: string): boolean {
    return this.schemas.has(name);
  }

  create(request: { parent: unknown; schemaId?: unknown; schema: unknown }): Promise<SchemaResource> {
    return this.mutate(() => {
      const project = parseProjectParent(request.parent);
      const schema = fields(request.schema, 'schema');
      const name = this.newSchemaName(project, request.schemaId, schema.name);
      const compiled = compileSchema(schema.type, schema.definition);
      if (this.schemas.has(name)) throw new AlreadyExistsError('Schema', name);
      const count = [...this.schemas.keys()].filter((n) => n.startsWith(`projects/${project}/schemas/`)).length;
      if (count >= MAX_SCHEMAS_PER_PROJECT) {
        throw new OrderlyError('RESOURCE_EXHAUSTED', `project ${project} has ${count} schemas, the most Pub/Sub allows; delete one first`);
      }
      const revision = this.newRevision([], compiled.definition);
      const record: SchemaRecord = { name, type: compiled.type, revisions: [revision] };
      return { change: { kind: 'put', record }, result: resource(record, revision, 'FULL') };
    });
  }

  commit(request: { name: unknown; schema: unknown }): Promise<SchemaResource> {
    return this.mutate(() => {
      const record = this.record(parseSchemaName(request.name, 'name').name);
      const schema = fields(request.schema, 'schema');
      if (schema.name !== undefined && schema.name !== '' && schema.name !== record.name) {
        throw new InvalidArgumentError('schema.name', `must be empty or ${record.name}, got ${JSON.stringify(schema.name)}`);
      }
      const type =
        schema.type === undefined || schema.type === 0 || schema.type === 'TYPE_UNSPECIFIED'
          ? record.type
          : parseSchemaType(schema.type, 'schema.type');
      if (type !== record.type)
        throw new InvalidArgumentError('schema.type', `schema ${record.name} is ${record.type}; a revision cannot change it to ${type}`);
      const compiled = compileSchema(type, schema.definition);
      this.checkRevisionLimit(record);
      for (const previous of [...record.revisions].reverse()) {
        if (previous.definition === undefined) continue;
        const why = incompatibility(compiled, compileSchema(record.type, previous.definition));
        if (why)
          throw new InvalidArgumentError(
            'schema.definition',
            `the new revision is incompatible with revision ${previous.revisionId}: ${why}`,
          );
      }
      return this.addRevision(record, compiled.definition);
    });
  }

  rollback(request: { name: unknown; revisionId: unknown }): Promise<SchemaResource> {
    return this.mutate(() => {
      const record = this.record(parseSchemaName(request.name, 'name').name);
      if (typeof request.revisionId !== 'string' || request.revisionId === '')
        throw new InvalidArgumentError('revisionId', 'the revision to roll back to is required');
      const target = this.revision(record, request.revisionId);
      this.checkRevisionLimit(record);
      return this.addRevision(record, target.definition);
    });
  }

  /** Deletes one revision (`name@revisionId`, or `name` with the deprecated `revisionId` field); returns it. */
  deleteRevision(request: { name: unknown; revisionId?: unknown }): Promise<SchemaResource> {
    return this.mutate(() => {
      const ref = parseSchemaName(request.name, 'name', true);
      const given = request.revisionId ?? '';
      if (typeof given !== 'string')
        throw new InvalidArgumentError('revisionId', `must be a string, got ${JSON.stringify(given) ?? typeof given}`);
      const extra = given === '' ? undefined : given;
      if (ref.revisionId && extra && ref.revisionId !== extra) {
        throw new InvalidArgumentError('revisionId', `names revision ${extra}, but name names revision ${ref.revisionId}`);
      }
      const revisionId = ref.revisionId ?? extra;
      if (!revisionId) throw new InvalidArgumentError('name', `names no revision; use ${ref.name}@{revisionId}`);
      const record = this.record(ref.name);
      const target = this.revision(record, revisionId);
      if (record.revisions.filter((r) => r.definition !== undefined).length === 1) {
        throw new FailedPreconditionError(
          `revision ${revisionId} is the only revision of schema ${record.name} and cannot be deleted; delete the schema instead`,
        );
      }
      const next: SchemaRecord = {
        ...record,
        revisions: record.revisions.map((r) =>
          r.revisionId === revisionId ? { revisionId: r.revisionId, revisionCreateTime: r.revisionCreateTime } : { ...r },
        ),
      };
      return { change: { kind: 'put', record: next }, result: resource(record, target, 'FULL') };
    });
  }

  /** Deletes a schema; topics naming it must then be pointed at DELETED_SCHEMA (see the class comment). */
  delete(name: unknown): Promise<{ name: string }> {
    return this.mutate(() => {
      const record = this.record(parseSchemaName(name, 'name').name);
      return { change: { kind: 'delete', name: record.name }, result: { name: record.name } };
    });
  }

  private mutate<T>(plan: () => { change: SchemaChange; result: T }): Promise<T> {
    const run = this.queue.then(async () => {
      const { change, result } = plan();
      await this.persist(copyChange(change));
      if (change.kind === 'put') this.schemas.set(change.record.name, change.record);
      else this.schemas.delete(change.name);
      return result;
    });
    // A failed mutation must not stop the ones queued after it; its caller gets the rejection.
    this.queue = run.catch(() => undefined);
    return run;
  }

  private record(name: string): SchemaRecord {
    const record = this.schemas.get(name);
    if (!record) throw new NotFoundError('Schema', name);
    return record;
  }

  /** A live revision by id, or the latest without one. */
  private revision(record: SchemaRecord, revisionId: string | undefined): SchemaRevisionRecord & { definition: string } {
    const revision =
      revisionId === undefined ? latest(record) : record.revisions.find((r) => r.revisionId === revisionId && r.definition !== undefined);
    if (!revision) throw new NotFoundError('Schema revision', `${record.name}@${revisionId}`);
    return revision as SchemaRevisionRecord & { definition: string };
  }

  private newSchemaName(project: string, schemaId: unknown, name: unknown): string {
    const hasId = schemaId !== undefined && schemaId !== '';
    if (hasId && typeof schemaId !== 'string') throw new InvalidArgumentError('schemaId', 'must be a string');
    if (hasId) checkSchemaId(schemaId, 'schemaId');
    const fromId = hasId ? `projects/${project}/schemas/${schemaId}` : undefined;
    if (name === undefined || name === '') {
      if (!fromId) throw new InvalidArgumentError('schemaId', 'the id of the new schema is required');
      return fromId;
    }
    const parsed = parseSchemaName(name, 'schema.name');
    if (parsed.project !== project)
      throw new InvalidArgumentError('schema.name', `is in project ${parsed.project}, but parent is projects/${project}`);
    if (fromId && parsed.name !== fromId)
      throw new InvalidArgumentError('schema.name', `must be empty or ${fromId} (from schemaId), got ${parsed.name}`);
    return parsed.name;
  }

  private checkRevisionLimit(record: SchemaRecord): void {
    const live = record.revisions.filter((r) => r.definition !== undefined).length;
    if (live >= MAX_REVISIONS) {
      throw new OrderlyError(
        'RESOURCE_EXHAUSTED',
        `schema ${record.name} has ${live} revisions, the most Pub/Sub allows; delete a revision before adding another`,
      );
    }
  }

  private addRevision(record: SchemaRecord, definition: string): { change: SchemaChange; result: SchemaResource } {
    const revision = this.newRevision(record.revisions, definition);
    const next: SchemaRecord = { ...record, revisions: [...record.revisions.map((r) => ({ ...r })), revision] };
    return { change: { kind: 'put', record: next }, result: resource(next, revision, 'FULL') };
  }

  private newRevision(existing: SchemaRevisionRecord[], definition: string): SchemaRevisionRecord & { definition: string } {
    let revisionId = this.newRevisionId();
    while (existing.some((r) => r.revisionId === revisionId)) revisionId = this.newRevisionId();
    return { revisionId, revisionCreateTime: new Date(this.clock.now()).toISOString(), definition };
  }
}

function latest(record: SchemaRecord): SchemaRevisionRecord & { definition: string } {
  for (let i = record.revisions.length - 1; i >= 0; i--) {
    const r = record.revisions[i]!;
    if (r.definition !== undefined) return r as SchemaRevisionRecord & { definition: string };
  }
  throw new Error(`schema ${record.name} has no live revision`);
}

function resource(record: SchemaRecord, revision: SchemaRevisionRecord, view: SchemaView): SchemaResource {
  const result: SchemaResource = {
    name: record.name,
    type: record.type,
    revisionId: revision.revisionId,
    revisionCreateTime: revision.revisionCreateTime,
  };
  if (view === 'FULL') result.definition = revision.definition;
  return result;
}

function parseView(view: unknown, fallback: SchemaView): SchemaView {
  if (view === undefined || view === null || view === 0 || view === '' || view === 'SCHEMA_VIEW_UNSPECIFIED') return fallback;
  if (view === 'BASIC' || view === 1) return 'BASIC';
  if (view === 'FULL' || view === 2) return 'FULL';
  throw new InvalidArgumentError('view', `must be BASIC or FULL, got ${JSON.stringify(view) ?? typeof view}`);
}

function fields(value: unknown, field: string): Fields {
  if (!value || typeof value !== 'object' || Array.isArray(value)) throw new InvalidArgumentError(field, 'is required');
  return value as Fields;
}

function copy(record: SchemaRecord): SchemaRecord {
  return { name: record.name, type: record.type, revisions: record.revisions.map((r) => ({ ...r })) };
}

function copyChange(change: SchemaChange): SchemaChange {
  return change.kind === 'put' ? { kind: 'put', record: copy(change.record) } : { ...change };
}
