import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { OrderlyError, type StatusCode } from '../../src/core/errors.js';
import { DELETED_SCHEMA } from '../../src/schema/schema-name.js';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from '../../src/core/paging.js';
import { MAX_REVISIONS, SchemaRegistry, type SchemaChange, type SchemaRecord } from '../../src/schema/schema-registry.js';

const AVRO_V1 = JSON.stringify({ type: 'record', name: 'Event', fields: [{ name: 'user', type: 'string' }] });
const AVRO_V2 = JSON.stringify({
  type: 'record',
  name: 'Event',
  fields: [
    { name: 'user', type: 'string' },
    { name: 'n', type: 'long', default: 0 },
  ],
});
const PROTO_V1 = 'syntax = "proto3"; message Event { string user = 1; optional string device = 4; }';

function setup(options: { persist?: (c: SchemaChange) => void | Promise<void>; records?: SchemaRecord[] } = {}) {
  const clock = new ManualClock(Date.UTC(2026, 0, 1));
  let n = 0;
  const registry = new SchemaRegistry({ clock, newRevisionId: () => (++n).toString(16).padStart(8, '0'), ...options });
  const create = (id: string, definition = AVRO_V1, type = 'AVRO', project = 'p') =>
    registry.create({ parent: `projects/${project}`, schemaId: id, schema: { type, definition } });
  return { registry, clock, create };
}

async function rejection(p: Promise<unknown> | (() => unknown), code: StatusCode): Promise<OrderlyError> {
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (e) {
    expect(e).toBeInstanceOf(OrderlyError);
    expect((e as OrderlyError).code).toBe(code);
    return e as OrderlyError;
  }
  throw new Error(`expected ${code}`);
}

describe('SchemaRegistry: create, get, list, delete', () => {
  it('creates a schema with a first revision (8 hex digits, creation time) and returns the FULL view', async () => {
    const { registry, create, clock } = setup();
    clock.advance(1500);
    const s = await create('events');
    expect(s).toEqual({
      name: 'projects/p/schemas/events',
      type: 'AVRO',
      definition: AVRO_V1,
      revisionId: '00000001',
      revisionCreateTime: '2026-01-01T00:00:01.500Z',
    });
    expect(registry.get('projects/p/schemas/events')).toEqual(s);
    expect(registry.get('projects/p/schemas/events', 'BASIC')).toEqual({
      name: s.name,
      type: 'AVRO',
      revisionId: '00000001',
      revisionCreateTime: s.revisionCreateTime,
    });
    const random = await new SchemaRegistry().create({
      parent: 'projects/p',
      schemaId: 'r1x',
      schema: { type: 'AVRO', definition: '"string"' },
    });
    expect(random.revisionId).toMatch(/^[0-9a-f]{8}$/);
  });

  it('takes the name from schema.name when schemaId is absent, and refuses names that disagree', async () => {
    const { registry } = setup();
    expect(
      (await registry.create({ parent: 'projects/p', schema: { name: 'projects/p/schemas/by-name', type: 'AVRO', definition: AVRO_V1 } }))
        .name,
    ).toBe('projects/p/schemas/by-name');
    await rejection(
      registry.create({
        parent: 'projects/p',
        schemaId: 'a-b',
        schema: { name: 'projects/p/schemas/other', type: 'AVRO', definition: AVRO_V1 },
      }),
      'INVALID_ARGUMENT',
    );
    await rejection(
      registry.create({ parent: 'projects/p', schema: { name: 'projects/q/schemas/abc', type: 'AVRO', definition: AVRO_V1 } }),
      'INVALID_ARGUMENT',
    );
    const e = await rejection(registry.create({ parent: 'projects/p', schema: { type: 'AVRO', definition: AVRO_V1 } }), 'INVALID_ARGUMENT');
    expect(e.message).toBe('schemaId: the id of the new schema is required');
  });

  it('refuses bad ids, bad parents, bad definitions, and an existing name', async () => {
    const { create, registry } = setup();
    for (const id of ['ab', 'goog-schema', '1abc', 'a/b', 'x'.repeat(256)])
      expect((await rejection(create(id), 'INVALID_ARGUMENT')).message).toMatch(/^schemaId: invalid schema id/);
    expect(
      (
        await rejection(
          registry.create({ parent: 'project/p', schemaId: 'abc', schema: { type: 'AVRO', definition: AVRO_V1 } }),
          'INVALID_ARGUMENT',
        )
      ).message,
    ).toBe('parent: expected projects/{project}, got "project/p"');
    expect((await rejection(create('abc', '{"type": "record"}'), 'INVALID_ARGUMENT')).message).toMatch(
      /^schema\.definition: not a valid Avro schema/,
    );
    expect((await rejection(create('abc', AVRO_V1, 'XML'), 'INVALID_ARGUMENT')).message).toBe(
      'schema.type: must be AVRO or PROTOCOL_BUFFER, got "XML"',
    );
    await create('abc');
    expect((await rejection(create('abc'), 'ALREADY_EXISTS')).message).toBe('Schema already exists: projects/p/schemas/abc');
  });

  it('answers NOT_FOUND for a missing schema or revision', async () => {
    const { registry, create } = setup();
    await create('abc');
    expect((await rejection(() => registry.get('projects/p/schemas/nope'), 'NOT_FOUND')).message).toBe(
      'Schema not found: projects/p/schemas/nope',
    );
    expect((await rejection(() => registry.get('projects/p/schemas/abc@ffffffff'), 'NOT_FOUND')).message).toBe(
      'Schema revision not found: projects/p/schemas/abc@ffffffff',
    );
    await rejection(registry.delete('projects/p/schemas/nope'), 'NOT_FOUND');
  });

  it('lists a project’s schemas by name in pages (BASIC view unless FULL is asked for)', async () => {
    const { registry, create } = setup();
    for (const id of ['eee', 'bbb', 'ddd', 'aaa', 'ccc']) await create(id);
    await create('zzz', AVRO_V1, 'AVRO', 'other');
    const page1 = registry.list({ parent: 'projects/p', pageSize: 2 });
    expect(page1.schemas.map((s) => s.name.split('/').pop())).toEqual(['aaa', 'bbb']);
    expect(page1.schemas[0]).not.toHaveProperty('definition');
    expect(page1.nextPageToken).not.toBe('');
    // A schema deleted between pages does not make the list repeat or skip the others.
    await registry.delete('projects/p/schemas/ccc');
    const page2 = registry.list({ parent: 'projects/p', pageSize: 2, pageToken: page1.nextPageToken, view: 'FULL' });
    expect(page2.schemas.map((s) => s.name.split('/').pop())).toEqual(['ddd', 'eee']);
    expect(page2.schemas[0]!.definition).toBe(AVRO_V1);
    expect(page2.nextPageToken).toBe('');
    expect(registry.list({ parent: 'projects/p' }).schemas).toHaveLength(4);
    expect(registry.list({ parent: 'projects/empty' })).toEqual({ schemas: [], nextPageToken: '' });
    expect((await rejection(() => registry.list({ parent: 'projects/p', pageToken: 'garbage!' }), 'INVALID_ARGUMENT')).message).toBe(
      'pageToken: not a page token from an earlier response of this list',
    );
    await rejection(() => registry.list({ parent: 'projects/p', pageSize: -1 }), 'INVALID_ARGUMENT');
    await rejection(() => registry.list({ parent: 'projects/p', view: 'ALL' }), 'INVALID_ARGUMENT');
  });

  it('pages by 100 when no page size is given, and by at most 1000', async () => {
    const { registry, create } = setup();
    for (let i = 0; i < MAX_PAGE_SIZE + 1; i++) await create(`s${String(i).padStart(4, '0')}`);
    expect(registry.list({ parent: 'projects/p' }).schemas).toHaveLength(DEFAULT_PAGE_SIZE);
    expect(registry.list({ parent: 'projects/p', pageSize: 0 }).schemas).toHaveLength(DEFAULT_PAGE_SIZE);
    const capped = registry.list({ parent: 'projects/p', pageSize: 5000 });
    expect(capped.schemas).toHaveLength(MAX_PAGE_SIZE);
    expect(registry.list({ parent: 'projects/p', pageSize: 5000, pageToken: capped.nextPageToken }).schemas.map((s) => s.name)).toEqual([
      'projects/p/schemas/s1000',
    ]);
  });

  it('deletes a schema: it is gone, its name can be reused, and topics must then show _deleted-schema_', async () => {
    const { registry, create } = setup();
    await create('abc');
    const settings = registry.checkTopicSettings({ schema: 'projects/p/schemas/abc', encoding: 'JSON' });
    expect(await registry.delete('projects/p/schemas/abc')).toEqual({ name: 'projects/p/schemas/abc' });
    await rejection(() => registry.get('projects/p/schemas/abc'), 'NOT_FOUND');
    // What the caller does to the topics (the registry tells it which schema went):
    const topic = { ...settings, schema: DELETED_SCHEMA };
    expect(DELETED_SCHEMA).toBe('_deleted-schema_');
    expect((await rejection(() => registry.validateForTopic(topic, Buffer.from('{"user": "u"}')), 'NOT_FOUND')).message).toContain(
      '_deleted-schema_',
    );
    // The old settings object still naming the schema fails the same way.
    await rejection(() => registry.validateForTopic(settings, Buffer.from('{"user": "u"}')), 'NOT_FOUND');
    expect((await create('abc', PROTO_V1, 'PROTOCOL_BUFFER')).type).toBe('PROTOCOL_BUFFER');
  });
});

describe('SchemaRegistry: revisions', () => {
  it('commits compatible revisions, lists them newest first in pages, and gets any by name@revisionId', async () => {
    const { registry, create, clock } = setup();
    await create('evt');
    clock.advance(1000);
    const v2 = await registry.commit({ name: 'projects/p/schemas/evt', schema: { type: 'AVRO', definition: AVRO_V2 } });
    expect(v2).toMatchObject({ revisionId: '00000002', definition: AVRO_V2, revisionCreateTime: '2026-01-01T00:00:01.000Z' });
    const v3 = await registry.commit({ name: 'projects/p/schemas/evt', schema: { definition: AVRO_V1 } }); // type may be left out
    expect(registry.get('projects/p/schemas/evt').revisionId).toBe(v3.revisionId);
    expect(registry.get('projects/p/schemas/evt@00000002').definition).toBe(AVRO_V2);
    const page1 = registry.listRevisions({ name: 'projects/p/schemas/evt', pageSize: 2 });
    expect(page1.schemas.map((s) => s.revisionId)).toEqual(['00000003', '00000002']);
    expect(page1.schemas[0]).not.toHaveProperty('definition');
    const page2 = registry.listRevisions({ name: 'projects/p/schemas/evt', pageSize: 2, pageToken: page1.nextPageToken, view: 'FULL' });
    expect(page2.schemas.map((s) => [s.revisionId, s.definition])).toEqual([['00000001', AVRO_V1]]);
    expect(page2.nextPageToken).toBe('');
  });

  it('refuses an Avro revision that cannot read, or be read by, an earlier one', async () => {
    const { registry, create } = setup();
    await create('evt');
    const noDefault = JSON.stringify({
      type: 'record',
      name: 'Event',
      fields: [
        { name: 'user', type: 'string' },
        { name: 'n', type: 'long' },
      ],
    });
    const e = await rejection(
      registry.commit({ name: 'projects/p/schemas/evt', schema: { type: 'AVRO', definition: noDefault } }),
      'INVALID_ARGUMENT',
    );
    expect(e.message).toMatch(
      /^schema\.definition: the new revision is incompatible with revision 00000001: the new revision cannot read data written with the earlier revision/,
    );
    const retyped = JSON.stringify({ type: 'record', name: 'Event', fields: [{ name: 'user', type: 'int' }] });
    await rejection(registry.commit({ name: 'projects/p/schemas/evt', schema: { type: 'AVRO', definition: retyped } }), 'INVALID_ARGUMENT');
    await rejection(
      registry.commit({ name: 'projects/p/schemas/evt', schema: { type: 'PROTOCOL_BUFFER', definition: PROTO_V1 } }),
      'INVALID_ARGUMENT',
    );
    expect(registry.listRevisions({ name: 'projects/p/schemas/evt' }).schemas).toHaveLength(1);
  });

  it('names the types when a record would read data that is not a record', async () => {
    const { registry, create } = setup();
    const commit = (id: string, definition: unknown) =>
      registry.commit({ name: `projects/p/schemas/${id}`, schema: { type: 'AVRO', definition: JSON.stringify(definition) } });
    await create('plain', '"int"');
    const record = { type: 'record', name: 'R', fields: [{ name: 'a', type: 'int' }] };
    expect((await rejection(commit('plain', record), 'INVALID_ARGUMENT')).message).toBe(
      'schema.definition: the new revision is incompatible with revision 00000001: the new revision cannot read data written with the earlier revision: cannot read int as record R',
    );
    // Deeper, inside an array of a record field, and from a branch of a writer union.
    const nested = (item: unknown) => ({
      type: 'record',
      name: 'Event',
      fields: [{ name: 'lines', type: { type: 'array', items: item } }],
    });
    await create('deep', JSON.stringify(nested([{ type: 'enum', name: 'Kind', symbols: ['A'] }, 'null'])));
    expect((await rejection(commit('deep', nested(record)), 'INVALID_ARGUMENT')).message).toMatch(
      /cannot read enum Kind as record R \(at Event\.lines\[\]\)$/,
    );
  });

  it('lets a proto revision add or remove optional fields only, checked against every earlier revision', async () => {
    const { registry, create } = setup();
    const name = 'projects/p/schemas/evt';
    await create('evt', PROTO_V1, 'PROTOCOL_BUFFER');
    const commit = (definition: string) => registry.commit({ name, schema: { type: 'PROTOCOL_BUFFER', definition } });
    // Removing the optional field 4 is compatible.
    await commit('syntax = "proto3"; message Event { string user = 1; }');
    // Field 4 with another type is compatible with the latest revision, not with the first: refused.
    const e = await rejection(
      commit('syntax = "proto3"; message Event { string user = 1; optional int64 device_id = 4; }'),
      'INVALID_ARGUMENT',
    );
    expect(e.message).toBe(
      'schema.definition: the new revision is incompatible with revision 00000001: device_id of type optional int64 is not compatible with device of type optional string (field 4 of Event)',
    );
    expect(
      (await rejection(commit('syntax = "proto3"; message Event { string user = 1; int32 count = 2; }'), 'INVALID_ARGUMENT')).message,
    ).toContain('count (field 2 of Event) is added, but only optional fields may be added or removed');
    expect(
      (await rejection(commit('syntax = "proto3"; message Event { optional string device = 4; }'), 'INVALID_ARGUMENT')).message,
    ).toContain('user (field 1 of Event) is removed');
    expect((await rejection(commit('syntax = "proto3"; message Event { string name = 1; }'), 'INVALID_ARGUMENT')).message).toContain(
      'name of type string is not compatible with user of type string',
    );
    expect(
      (
        await commit(
          'syntax = "proto3"; message Event { string user = 1; optional string device = 4; optional Extra extra = 5; message Extra { int32 a = 1; } }',
        )
      ).revisionId,
    ).toBe('00000003');
  });

  it('keeps at most 20 revisions', async () => {
    const { registry, create } = setup();
    const name = 'projects/p/schemas/evt';
    await create('evt');
    for (let i = 1; i < MAX_REVISIONS; i++) await registry.commit({ name, schema: { type: 'AVRO', definition: AVRO_V1 } });
    const e = await rejection(registry.commit({ name, schema: { type: 'AVRO', definition: AVRO_V1 } }), 'RESOURCE_EXHAUSTED');
    expect(e.message).toBe(
      'schema projects/p/schemas/evt has 20 revisions, the most Pub/Sub allows; delete a revision before adding another',
    );
    await rejection(registry.rollback({ name, revisionId: '00000001' }), 'RESOURCE_EXHAUSTED');
    await registry.deleteRevision({ name: `${name}@00000005` });
    expect((await registry.commit({ name, schema: { type: 'AVRO', definition: AVRO_V1 } })).revisionId).toBe('00000015');
  });

  it('rolls back by adding a revision that copies an older one', async () => {
    const { registry, create } = setup();
    const name = 'projects/p/schemas/evt';
    await create('evt');
    await registry.commit({ name, schema: { type: 'AVRO', definition: AVRO_V2 } });
    const back = await registry.rollback({ name, revisionId: '00000001' });
    expect(back).toMatchObject({ revisionId: '00000003', definition: AVRO_V1 });
    expect(registry.listRevisions({ name }).schemas.map((s) => s.revisionId)).toEqual(['00000003', '00000002', '00000001']);
    await rejection(registry.rollback({ name, revisionId: 'ffffffff' }), 'NOT_FOUND');
    await rejection(registry.rollback({ name, revisionId: '' }), 'INVALID_ARGUMENT');
  });

  it('deletes a revision by name@revisionId (or the deprecated revisionId field), never the only one', async () => {
    const { registry, create } = setup();
    const name = 'projects/p/schemas/evt';
    await create('evt');
    expect((await rejection(registry.deleteRevision({ name: `${name}@00000001` }), 'FAILED_PRECONDITION')).message).toBe(
      'revision 00000001 is the only revision of schema projects/p/schemas/evt and cannot be deleted; delete the schema instead',
    );
    await registry.commit({ name, schema: { type: 'AVRO', definition: AVRO_V2 } });
    const deleted = await registry.deleteRevision({ name, revisionId: '00000002' });
    expect(deleted).toMatchObject({ revisionId: '00000002', definition: AVRO_V2 });
    expect(registry.get(name).revisionId).toBe('00000001');
    await rejection(() => registry.get(`${name}@00000002`), 'NOT_FOUND');
    await rejection(registry.deleteRevision({ name: `${name}@00000002` }), 'NOT_FOUND');
    await rejection(registry.deleteRevision({ name }), 'INVALID_ARGUMENT');
    await rejection(registry.deleteRevision({ name: `${name}@00000001`, revisionId: '00000003' }), 'INVALID_ARGUMENT');
    // A revision id that is not a string is refused as such, not turned into "[object Object]".
    expect(
      (await rejection(registry.deleteRevision({ name: `${name}@00000001`, revisionId: { id: 1 } }), 'INVALID_ARGUMENT')).message,
    ).toBe('revisionId: must be a string, got {"id":1}');
    // A revision id in a name where a schema is meant is refused.
    await rejection(registry.commit({ name: `${name}@00000001`, schema: { type: 'AVRO', definition: AVRO_V1 } }), 'INVALID_ARGUMENT');
  });
});

describe('SchemaRegistry: validation and topics', () => {
  it('ValidateSchema checks a definition without storing it', async () => {
    const { registry } = setup();
    expect(registry.validateSchema({ parent: 'projects/p', schema: { type: 'PROTOCOL_BUFFER', definition: PROTO_V1 } })).toBeUndefined();
    expect(
      (
        await rejection(
          () => registry.validateSchema({ parent: 'projects/p', schema: { type: 'PROTOCOL_BUFFER', definition: 'message {' } }),
          'INVALID_ARGUMENT',
        )
      ).message,
    ).toMatch(/^schema\.definition: not a valid Protocol Buffer definition/);
    expect(registry.list({ parent: 'projects/p' }).schemas).toEqual([]);
  });

  it('ValidateSchema, CreateSchema and CommitSchema refuse a definition protoc refuses, though protobufjs parses it', async () => {
    const { registry, create } = setup();
    const bad = 'syntax = "proto3"; message Event { string user = 1; optional string device = 4 [foo = true]; }';
    const expected = 'schema.definition: field Event.device has an unknown option foo';
    const validate = () => registry.validateSchema({ parent: 'projects/p', schema: { type: 'PROTOCOL_BUFFER', definition: bad } });
    expect((await rejection(validate, 'INVALID_ARGUMENT')).message).toBe(expected);
    expect((await rejection(create('evt', bad, 'PROTOCOL_BUFFER'), 'INVALID_ARGUMENT')).message).toBe(expected);
    await create('evt', PROTO_V1, 'PROTOCOL_BUFFER');
    const commit = registry.commit({ name: 'projects/p/schemas/evt', schema: { type: 'PROTOCOL_BUFFER', definition: bad } });
    expect((await rejection(commit, 'INVALID_ARGUMENT')).message).toBe(expected);
    expect(registry.listRevisions({ name: 'projects/p/schemas/evt' }).schemas).toHaveLength(1);
  });

  it('ValidateMessage by name (latest or name@revisionId) or with an inline schema, errors on `message`', async () => {
    const { registry, create } = setup();
    await create('evt');
    await registry.commit({ name: 'projects/p/schemas/evt', schema: { type: 'AVRO', definition: AVRO_V2 } });
    const v = { parent: 'projects/p', encoding: 'JSON' };
    expect(registry.validateMessage({ ...v, name: 'projects/p/schemas/evt', message: Buffer.from('{"user": "u", "n": 1}') }).value).toEqual(
      { user: 'u', n: 1n },
    );
    expect(
      registry.validateMessage({ ...v, name: 'projects/p/schemas/evt@00000001', message: Buffer.from('{"user": "u"}') }).value,
    ).toEqual({ user: 'u' });
    const e = await rejection(
      () => registry.validateMessage({ ...v, name: 'projects/p/schemas/evt', message: Buffer.from('{"user": "u"}') }),
      'INVALID_ARGUMENT',
    );
    expect(e.message).toBe(
      "message: does not match the schema at .n: missing; Avro's JSON encoding needs every field of a record, also one with a default",
    );
    expect(
      registry.validateMessage({ ...v, schema: { type: 'PROTOCOL_BUFFER', definition: PROTO_V1 }, message: Buffer.from('{"user": "u"}') })
        .value,
    ).toEqual({ user: 'u' });
    await rejection(() => registry.validateMessage({ ...v, message: Buffer.from('{}') }), 'INVALID_ARGUMENT');
    await rejection(
      () =>
        registry.validateMessage({
          ...v,
          name: 'projects/p/schemas/evt',
          schema: { type: 'AVRO', definition: AVRO_V1 },
          message: Buffer.from('{}'),
        }),
      'INVALID_ARGUMENT',
    );
    await rejection(() => registry.validateMessage({ ...v, name: 'projects/p/schemas/none', message: Buffer.from('{}') }), 'NOT_FOUND');
    await rejection(
      () =>
        registry.validateMessage({
          parent: 'projects/p',
          encoding: 'ENCODING_UNSPECIFIED',
          name: 'projects/p/schemas/evt',
          message: Buffer.from('{}'),
        }),
      'INVALID_ARGUMENT',
    );
  });

  it('checks a topic’s schemaSettings: the schema exists, the encoding is given, the revision range is real and ordered', async () => {
    const { registry, create } = setup();
    await create('evt');
    await registry.commit({ name: 'projects/p/schemas/evt', schema: { type: 'AVRO', definition: AVRO_V2 } });
    expect(
      registry.checkTopicSettings({
        schema: 'projects/p/schemas/evt',
        encoding: 'BINARY',
        firstRevisionId: '',
        lastRevisionId: '00000002',
      }),
    ).toEqual({
      schema: 'projects/p/schemas/evt',
      encoding: 'BINARY',
      lastRevisionId: '00000002',
    });
    await rejection(() => registry.checkTopicSettings({ schema: 'projects/p/schemas/none', encoding: 'JSON' }), 'NOT_FOUND');
    expect((await rejection(() => registry.checkTopicSettings({ schema: 'projects/p/schemas/evt' }), 'INVALID_ARGUMENT')).message).toBe(
      'schemaSettings.encoding: must be JSON or BINARY, got undefined',
    );
    expect(
      (
        await rejection(
          () => registry.checkTopicSettings({ schema: 'projects/p/schemas/evt', encoding: 'JSON', firstRevisionId: 'nope' }),
          'INVALID_ARGUMENT',
        )
      ).message,
    ).toBe('schemaSettings.firstRevisionId: schema projects/p/schemas/evt has no revision "nope"');
    await rejection(
      () =>
        registry.checkTopicSettings({
          schema: 'projects/p/schemas/evt',
          encoding: 'JSON',
          firstRevisionId: '00000002',
          lastRevisionId: '00000001',
        }),
      'INVALID_ARGUMENT',
    );
    await rejection(() => registry.checkTopicSettings({ schema: DELETED_SCHEMA, encoding: 'JSON' }), 'INVALID_ARGUMENT');
  });

  it('validates a publish against the topic’s range and says which revision matched', async () => {
    const { registry, create } = setup();
    await create('evt');
    await registry.commit({ name: 'projects/p/schemas/evt', schema: { type: 'AVRO', definition: AVRO_V2 } });
    const settings = registry.checkTopicSettings({ schema: 'projects/p/schemas/evt', encoding: 'JSON' });
    const ok = registry.validateForTopic(settings, Buffer.from('{"user": "u"}'));
    expect(ok.revisionId).toBe('00000001');
    expect(ok.attributes).toEqual({
      googclient_schemaname: 'projects/p/schemas/evt',
      googclient_schemarevisionid: '00000001',
      googclient_schemaencoding: 'JSON',
    });
    expect(registry.validateForTopic(settings, Buffer.from('{"user": "u", "n": 2}')).revisionId).toBe('00000002');
    const e = await rejection(() => registry.validateForTopic(settings, Buffer.from('{"user": 1}'), 4), 'INVALID_ARGUMENT');
    expect(e.message).toMatch(/^messages\[4\]\.data: does not match the schema at \.user: expected a string/);
    // The export decodes a stored message with the revision it was stamped with; a deleted one is gone.
    expect(registry.compiledRevision('projects/p/schemas/evt', '00000002').type).toBe('AVRO');
    await registry.deleteRevision({ name: 'projects/p/schemas/evt@00000002' });
    await rejection(() => registry.compiledRevision('projects/p/schemas/evt', '00000002'), 'NOT_FOUND');
  });
});

describe('SchemaRegistry: the persistence hook', () => {
  it('hands every change to persist, in order, and a registry built from the persisted records answers the same', async () => {
    const store = new Map<string, SchemaRecord>();
    const changes: string[] = [];
    const persist = (c: SchemaChange) => {
      changes.push(c.kind === 'put' ? `put ${c.record.name} (${c.record.revisions.length})` : `delete ${c.name}`);
      if (c.kind === 'put') store.set(c.record.name, JSON.parse(JSON.stringify(c.record)) as SchemaRecord);
      else store.delete(c.name);
    };
    const { registry, create } = setup({ persist });
    await create('one');
    await create('two');
    await registry.commit({ name: 'projects/p/schemas/one', schema: { type: 'AVRO', definition: AVRO_V2 } });
    await registry.deleteRevision({ name: 'projects/p/schemas/one@00000001' });
    await registry.delete('projects/p/schemas/two');
    expect(changes).toEqual([
      'put projects/p/schemas/one (1)',
      'put projects/p/schemas/two (1)',
      'put projects/p/schemas/one (2)',
      'put projects/p/schemas/one (2)',
      'delete projects/p/schemas/two',
    ]);
    // The deleted revision stays in the record as a tombstone (id and time, no definition).
    expect(store.get('projects/p/schemas/one')!.revisions[0]).toEqual({
      revisionId: '00000001',
      revisionCreateTime: '2026-01-01T00:00:00.000Z',
    });
    const reloaded = new SchemaRegistry({ records: store.values() });
    expect(reloaded.list({ parent: 'projects/p', view: 'FULL' })).toEqual(registry.list({ parent: 'projects/p', view: 'FULL' }));
    expect(reloaded.records()).toEqual(registry.records());
  });

  it('changes nothing when persist fails, and keeps serving later mutations', async () => {
    let fail = true;
    const { registry, create } = setup({
      persist: async () => {
        await new Promise((resolve) => setImmediate(resolve));
        if (fail) throw new Error('disk full');
      },
    });
    await expect(create('abc')).rejects.toThrow('disk full');
    await rejection(() => registry.get('projects/p/schemas/abc'), 'NOT_FOUND');
    fail = false;
    expect((await create('abc')).name).toBe('projects/p/schemas/abc');
  });

  it('runs mutations one at a time in call order, even when persisting is slow', async () => {
    const persisted: string[] = [];
    const { registry, create } = setup({
      persist: async (c) => {
        await new Promise((resolve) => setTimeout(resolve, 5));
        if (c.kind === 'put') persisted.push(c.record.revisions.map((r) => r.revisionId).join(','));
      },
    });
    await create('evt');
    const name = 'projects/p/schemas/evt';
    const [a, b, c] = await Promise.all([
      registry.commit({ name, schema: { type: 'AVRO', definition: AVRO_V2 } }),
      registry.commit({ name, schema: { type: 'AVRO', definition: AVRO_V1 } }),
      registry.rollback({ name, revisionId: '00000002' }),
    ]);
    expect([a.revisionId, b.revisionId, c.revisionId]).toEqual(['00000002', '00000003', '00000004']);
    expect(persisted.at(-1)).toBe('00000001,00000002,00000003,00000004');
    expect(registry.get(name).definition).toBe(AVRO_V2);
  });
});
