import * as grpc from '@grpc/grpc-js';
import { PubSub, v1, type ClientConfig } from '@google-cloud/pubsub';
import { OAuth2Client } from 'google-auth-library';
import { request } from 'node:http';
import { describe, expect, it } from 'vitest';
import { loadPubsubProto } from '../../src/api/pubsub-proto.js';
import { servePerFile } from '../helpers/serve-process.js';

/**
 * The REST API as Google's JSON API serves it (issue #13, #10): the same handlers and mapping as gRPC,
 * so SchemaService, IAM, paging and every field answer alike on both; Pub/Sub's JSON shapes; the URL's
 * project for short names.
 */
const { server, api } = servePerFile();
const P = '/v1/projects/rest-fidelity';

async function rest(method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(`http://${server.host}${path}`, {
    method,
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}

const AVRO = JSON.stringify({ type: 'record', name: 'Reading', fields: [{ name: 'value', type: 'double' }] });

describe('REST answers from the same mapping as gRPC', () => {
  it('a topic with retention and a schema reads the same over REST and gRPC, durations as "600s"', async () => {
    const schema = await rest('POST', `${P}/schemas?schemaId=readings`, { type: 'AVRO', definition: AVRO });
    expect(schema.status).toBe(200);
    expect(schema.json).toMatchObject({
      name: 'projects/rest-fidelity/schemas/readings',
      type: 'AVRO',
      definition: AVRO,
      revisionId: expect.stringMatching(/^[0-9a-f]{8}$/),
    });
    expect(schema.json.revisionCreateTime).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{3})?Z$/);
    const topic = await rest('PUT', `${P}/topics/readings`, {
      labels: { team: 'a' },
      messageRetentionDuration: '3600s',
      schemaSettings: { schema: 'projects/rest-fidelity/schemas/readings', encoding: 'JSON' },
    });
    expect(topic.json).toEqual({
      name: 'projects/rest-fidelity/topics/readings',
      labels: { team: 'a' },
      messageRetentionDuration: '3600s',
      schemaSettings: { schema: 'projects/rest-fidelity/schemas/readings', encoding: 'JSON' },
      state: 'ACTIVE',
    });
    const viaGrpc = await api.pub('getTopic', { topic: 'projects/rest-fidelity/topics/readings' });
    expect(viaGrpc).toMatchObject({
      labels: { team: 'a' },
      messageRetentionDuration: { seconds: '3600', nanos: 0 },
      schemaSettings: { encoding: 'JSON' },
      state: 'ACTIVE',
    });
    // A bad message is refused naming it; a good one is accepted.
    const bad = await rest('POST', `${P}/topics/readings:publish`, {
      messages: [{ data: Buffer.from('{"value": 1.5}').toString('base64') }, { data: Buffer.from('{}').toString('base64') }],
    });
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toMatch(/^messages\[1\]\.data: does not match the schema/);
    // A subscription in the URL's project, named by the topic's short name, sees the topic's retention.
    const sub = await rest('PUT', `${P}/subscriptions/readings-sub`, { topic: 'readings' });
    expect(sub.json).toMatchObject({
      topic: 'projects/rest-fidelity/topics/readings',
      topicMessageRetentionDuration: '3600s',
      messageRetentionDuration: '604800s',
    });
  });

  it('UpdateTopic applies exactly its mask; unknown, read-only and empty masks are refused', async () => {
    await rest('PUT', `${P}/topics/masked`, { labels: { keep: 'me' } });
    const patched = await rest('PATCH', `${P}/topics/masked`, {
      topic: { messageRetentionDuration: '7200s' },
      updateMask: 'messageRetentionDuration',
    });
    expect(patched.json).toEqual({
      name: 'projects/rest-fidelity/topics/masked',
      labels: { keep: 'me' },
      messageRetentionDuration: '7200s',
      state: 'ACTIVE',
    });
    const cleared = await rest('PATCH', `${P}/topics/masked`, { topic: {}, updateMask: 'message_retention_duration,labels' });
    expect(cleared.json).toEqual({ name: 'projects/rest-fidelity/topics/masked', state: 'ACTIVE' });
    for (const [mask, message] of [
      ['kmsKeyName', 'updateMask: kms_key_name: is not supported by Orderly'],
      ['state', 'updateMask: unknown or read-only field path "state"'],
      ['nonsense', 'updateMask: unknown or read-only field path "nonsense"'],
      ['', 'updateMask: must name at least one field to update'],
    ]) {
      expect((await rest('PATCH', `${P}/topics/masked`, { topic: {}, updateMask: mask })).json.error.message).toBe(message);
    }
  });

  it('gRPC update masks name fields as the proto does (snake_case): a camelCase path is refused, as Pub/Sub refuses it', async () => {
    await rest('PUT', `${P}/topics/grpc-masked`, {});
    await rest('PUT', `${P}/subscriptions/grpc-masked-sub`, { topic: 'grpc-masked' });
    const subscription = { name: 'projects/rest-fidelity/subscriptions/grpc-masked-sub', ackDeadlineSeconds: 30 };
    const topic = { name: 'projects/rest-fidelity/topics/grpc-masked', messageRetentionDuration: { seconds: 3600 } };
    // Pub/Sub: "'ackDeadlineSeconds' is not a known Subscription field. Note that field paths must be of the form 'push_config'".
    for (const [method, request] of [
      ['updateSubscription', { subscription, updateMask: { paths: ['ackDeadlineSeconds'] } }],
      ['updateSubscription', { subscription, updateMask: { paths: ['labels', 'pushConfig.pushEndpoint'] } }],
      ['updateTopic', { topic, updateMask: { paths: ['messageRetentionDuration'] } }],
    ] as const) {
      const call = method === 'updateTopic' ? api.pub(method, request) : api.sub(method, request);
      await expect(call, JSON.stringify(request.updateMask)).rejects.toMatchObject({
        code: grpc.status.INVALID_ARGUMENT,
        details: expect.stringMatching(
          /^updateMask: unknown field path "(ackDeadlineSeconds|pushConfig\.pushEndpoint|messageRetentionDuration)": paths are snake_case/,
        ),
      });
    }
    expect(await api.sub('updateSubscription', { subscription, updateMask: { paths: ['ack_deadline_seconds'] } })).toMatchObject({
      ackDeadlineSeconds: 30,
    });
    expect(await api.pub('updateTopic', { topic, updateMask: { paths: ['message_retention_duration'] } })).toMatchObject({
      messageRetentionDuration: { seconds: '3600' },
    });
    // REST masks are proto3 JSON, camelCase by definition: those still work.
    const patched = await rest('PATCH', `${P}/subscriptions/grpc-masked-sub`, {
      subscription: { ackDeadlineSeconds: 40 },
      updateMask: 'ackDeadlineSeconds',
    });
    expect(patched.json.ackDeadlineSeconds).toBe(40);
  });

  it('list calls page with pageSize and pageToken (query parameters), gRPC alike', async () => {
    for (const t of ['pg-1', 'pg-2', 'pg-3']) await rest('PUT', `/v1/projects/paging-project/topics/${t}`, {});
    for (const s of ['pg-sub-1', 'pg-sub-2', 'pg-sub-3'])
      await rest('PUT', `/v1/projects/paging-project/subscriptions/${s}`, { topic: 'pg-1' });
    const first = await rest('GET', '/v1/projects/paging-project/topics?pageSize=2');
    expect(first.json.topics.map((t: { name: string }) => t.name)).toEqual([
      'projects/paging-project/topics/pg-1',
      'projects/paging-project/topics/pg-2',
    ]);
    const second = await rest('GET', `/v1/projects/paging-project/topics?pageSize=2&pageToken=${first.json.nextPageToken}`);
    expect(second.json).toEqual({ topics: [{ name: 'projects/paging-project/topics/pg-3', state: 'ACTIVE' }] });
    const subs = await rest('GET', '/v1/projects/paging-project/topics/pg-1/subscriptions?page_size=2');
    expect(subs.json.subscriptions).toHaveLength(2);
    const rest2 = await api.pub('listTopicSubscriptions', {
      topic: 'projects/paging-project/topics/pg-1',
      pageSize: 2,
      pageToken: subs.json.nextPageToken,
    });
    expect(rest2).toEqual({ subscriptions: ['projects/paging-project/subscriptions/pg-sub-3'], nextPageToken: '' });
    const grpcSubs = await api.sub('listSubscriptions', { project: 'projects/paging-project', pageSize: 1 });
    expect(grpcSubs.subscriptions).toHaveLength(1);
    expect(grpcSubs.nextPageToken).not.toBe('');
    expect((await rest('GET', '/v1/projects/paging-project/topics?pageToken=bogus')).json.error.message).toMatch(
      /^pageToken: not a page token/,
    );
    expect((await rest('GET', '/v1/projects/paging-project/topics?pageSize=-1')).json.error.message).toMatch(/^pageSize: /);
    expect((await rest('GET', '/v1/projects/paging-project/topics?colour=red')).json.error.message).toBe('colour: unknown field');
    // One value for a field that takes one: a second is refused, not one of the two silently dropped.
    expect((await rest('GET', '/v1/projects/paging-project/topics?pageSize=2&pageSize=3')).json.error).toMatchObject({
      code: 400,
      message: 'pageSize: is given twice in the query string (it takes one value)',
    });
    expect((await rest('POST', `${P}/topics/readings:publish?pageSize=2`, { messages: [] })).json.error.message).toMatch(
      /^pageSize: unknown query parameter/,
    );
  });

  it("a page token works only for the list that gave it: another project's or another kind's list refuses it", async () => {
    for (const project of ['alpha-pages', 'zeta-pages']) {
      for (const t of ['t-1', 't-2', 't-3']) await rest('PUT', `/v1/projects/${project}/topics/${t}`, {});
      for (const s of ['s-1', 's-2']) await rest('PUT', `/v1/projects/${project}/subscriptions/${s}`, { topic: 't-1' });
    }
    const alpha = await rest('GET', '/v1/projects/alpha-pages/topics?pageSize=1');
    const zeta = await rest('GET', '/v1/projects/zeta-pages/topics?pageSize=1');
    // Before: zeta's token gave alpha an empty last page, alpha's gave zeta its whole list again.
    for (const [path, token] of [
      ['/v1/projects/alpha-pages/topics', zeta.json.nextPageToken],
      ['/v1/projects/zeta-pages/topics', alpha.json.nextPageToken],
      ['/v1/projects/alpha-pages/subscriptions', alpha.json.nextPageToken],
      [
        '/v1/projects/alpha-pages/topics/t-2/subscriptions',
        (await rest('GET', '/v1/projects/alpha-pages/topics/t-1/subscriptions?pageSize=1')).json.nextPageToken,
      ],
    ]) {
      const r = await rest('GET', `${path}?pageToken=${token}`);
      expect(r.status, path).toBe(400);
      expect(r.json.error.message).toMatch(/^pageToken: is a page token of another list/);
    }
    await expect(api.pub('listTopics', { project: 'projects/zeta-pages', pageToken: alpha.json.nextPageToken })).rejects.toMatchObject({
      code: grpc.status.INVALID_ARGUMENT,
      details: expect.stringMatching(/^pageToken: is a page token of another list \(topics of projects\/alpha-pages\)/),
    });
    // Its own list still pages on with it, over REST and gRPC, a bare topic id or a full name alike.
    const next = await rest('GET', `/v1/projects/alpha-pages/topics?pageSize=1&pageToken=${alpha.json.nextPageToken}`);
    expect(next.json.topics.map((t: { name: string }) => t.name)).toEqual(['projects/alpha-pages/topics/t-2']);
    const subs = await api.pub('listTopicSubscriptions', { topic: 'projects/alpha-pages/topics/t-1', pageSize: 1 });
    expect(
      (await rest('GET', `/v1/projects/alpha-pages/topics/t-1/subscriptions?pageToken=${subs.nextPageToken}`)).json.subscriptions,
    ).toEqual(['projects/alpha-pages/subscriptions/s-2']);
    // A token of an Orderly before tokens named their list (the key alone) still pages on after an upgrade.
    const keyOnly = Buffer.from('k:projects/alpha-pages/topics/t-1').toString('base64url');
    const resumed = await rest('GET', `/v1/projects/alpha-pages/topics?pageSize=1&pageToken=${keyOnly}`);
    expect(resumed.json.topics.map((t: { name: string }) => t.name)).toEqual(['projects/alpha-pages/topics/t-2']);
  });

  it('the fields system parameter answers with the fields it names (partial responses); a bad one refuses the request before it runs', async () => {
    await rest('PUT', `${P}/topics/partial`, { labels: { env: 'dev', team: 'a' }, messageRetentionDuration: '600s' });
    expect((await rest('GET', `${P}/topics/partial?fields=name,labels/env`)).json).toEqual({
      name: 'projects/rest-fidelity/topics/partial',
      labels: { env: 'dev' },
    });
    // Lists select inside each element; a proto name means its JSON name; `*` keeps every field.
    await rest('PUT', `${P}/subscriptions/partial-sub`, { topic: 'partial', ackDeadlineSeconds: 30 });
    const listed = await rest('GET', `${P}/subscriptions?fields=subscriptions(name,ack_deadline_seconds)`);
    expect(listed.json.subscriptions).toContainEqual({ name: 'projects/rest-fidelity/subscriptions/partial-sub', ackDeadlineSeconds: 30 });
    expect(listed.json.nextPageToken).toBeUndefined();
    const all = await rest('GET', `${P}/topics/partial?fields=*`);
    expect(all.json).toEqual((await rest('GET', `${P}/topics/partial`)).json);
    // A method with a body takes it too.
    const published = await rest('POST', `${P}/topics/partial:publish?fields=messageIds`, { messages: [{ data: 'AA==' }] });
    expect(published.json.messageIds).toHaveLength(1);

    const bad = await rest('PATCH', `${P}/topics/partial?fields=labels(`, {
      topic: { labels: { env: 'prod' } },
      updateMask: 'labels',
    });
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toBe('fields: expected a field name at position 7 in "labels("');
    expect((await rest('GET', `${P}/topics/partial`)).json.labels).toEqual({ env: 'dev', team: 'a' });
  });

  it('a fields selection of a field the answer lacks is refused, as Google refuses it, and so is one nesting without end', async () => {
    await rest('PUT', `${P}/topics/selected`, { labels: { env: 'dev' } });
    const unknown = await rest('PATCH', `${P}/topics/selected?fields=name,nmae`, {
      topic: { labels: { env: 'prod' } },
      updateMask: 'labels',
    });
    expect(unknown.status).toBe(400);
    expect(unknown.json.error).toMatchObject({
      status: 'INVALID_ARGUMENT',
      message: 'fields: invalid field selection nmae (Topic has no field nmae)',
    });
    expect((await rest('GET', `${P}/topics/selected`)).json.labels).toEqual({ env: 'dev' });
    // Inside lists, messages and scalars alike; a map's keys and Orderly's extensions take any name.
    expect((await rest('GET', `${P}/topics?fields=topics(name,bogus)`)).json.error.message).toBe(
      'fields: invalid field selection topics/bogus (Topic has no field bogus)',
    );
    expect((await rest('GET', `${P}/topics/selected?fields=name/first`)).json.error.message).toBe(
      'fields: invalid field selection name/first (name has no fields)',
    );
    expect((await rest('GET', `${P}/topics/selected?fields=messageRetentionDuration(seconds)`)).json.error.message).toBe(
      'fields: invalid field selection messageRetentionDuration/seconds (messageRetentionDuration has no fields)',
    );
    expect((await rest('GET', `${P}/topics/selected?fields=labels/env,labels/other`)).json).toEqual({ labels: { env: 'dev' } });
    // Nested past any answer's depth: a 400, not the parser's stack overflowing into a 500.
    const deep = await rest('GET', `${P}/topics/selected?fields=${'a('.repeat(5000)}b${')'.repeat(5000)}`);
    expect(deep.status).toBe(400);
    expect(deep.json.error.message).toMatch(/^fields: nests deeper than 32 fields at position/);
  });

  it('system parameters in every spelling Google takes: $fields and X-Goog-FieldMask, $alt, $prettyPrint, X-HTTP-Method-Override', async () => {
    const call = async (method: string, path: string, headers: Record<string, string> = {}, body?: unknown) => {
      const res = await fetch(`http://${server.host}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, text: await res.text() };
    };
    await rest('PUT', `${P}/topics/spelled`, { labels: { env: 'dev' } });
    const name = 'projects/rest-fidelity/topics/spelled';
    expect(await call('GET', `${P}/topics/spelled?%24fields=name`)).toEqual({ status: 200, text: JSON.stringify({ name }) });
    expect(await call('GET', `${P}/topics/spelled`, { 'x-goog-fieldmask': 'name' })).toEqual({
      status: 200,
      text: JSON.stringify({ name }),
    });
    expect(await call('GET', `${P}/topics/spelled?%24alt=json&%24prettyPrint=true&fields=name`)).toEqual({
      status: 200,
      text: JSON.stringify({ name }, null, 2),
    });
    // A proxy that passes only POST: the header (or $httpMethod) names the method meant.
    const patched = await call(
      'POST',
      `${P}/topics/spelled`,
      { 'x-http-method-override': 'PATCH' },
      { topic: { labels: { env: 'prod' } }, updateMask: 'labels' },
    );
    expect(patched.status).toBe(200);
    expect(JSON.parse(patched.text).labels).toEqual({ env: 'prod' });
    expect(JSON.parse((await call('POST', `${P}/topics/spelled?%24httpMethod=GET&fields=labels`)).text)).toEqual({
      labels: { env: 'prod' },
    });
    // Two spellings that disagree: refused, not one of them picked.
    const both = await call('GET', `${P}/topics/spelled?fields=name`, { 'x-goog-fieldmask': 'labels' });
    expect(both.status).toBe(400);
    expect(JSON.parse(both.text).error.message).toBe('fields: is given with different values (as fields, $fields, x-goog-fieldmask)');
  });

  it('a request target in absolute form (http://host/v1/...) is served as its path is, as HTTP/1.1 servers must', async () => {
    await rest('PUT', `${P}/topics/absolute`, { labels: { via: 'origin-form' } });
    const [hostname, port] = server.host.split(':');
    const answer = await new Promise<{ status: number; json: any }>((resolve, reject) => {
      const req = request({ hostname, port, path: `http://pubsub.googleapis.com${P}/topics/absolute?fields=labels` }, (res) => {
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode!, json: JSON.parse(text) }));
      });
      req.on('error', reject);
      req.end();
    });
    expect(answer).toEqual({ status: 200, json: { labels: { via: 'origin-form' } } });
  });

  it('a domain-scoped project (example.com:my-project) has the same names over REST as over gRPC: only a last segment\'s ":" starts a verb', async () => {
    const D = '/v1/projects/example.com:scoped';
    const topic = await rest('PUT', `${D}/topics/orders`, { labels: { via: 'rest' } });
    expect(topic).toEqual({
      status: 200,
      json: { name: 'projects/example.com:scoped/topics/orders', labels: { via: 'rest' }, state: 'ACTIVE' },
    });
    expect((await rest('PUT', `${D}/subscriptions/orders-pull`, { topic: 'projects/example.com:scoped/topics/orders' })).status).toBe(200);
    const published = await rest('POST', `${D}/topics/orders:publish`, { messages: [{ data: Buffer.from('paid').toString('base64') }] });
    expect(published.status).toBe(200);
    expect((await rest('GET', `${D}/topics/orders/subscriptions`)).json).toEqual({
      subscriptions: ['projects/example.com:scoped/subscriptions/orders-pull'],
    });
    expect((await rest('GET', `${D}/topics`)).json.topics).toEqual([
      expect.objectContaining({ name: 'projects/example.com:scoped/topics/orders' }),
    ]);
    expect((await rest('GET', `${D}/topics/orders:getIamPolicy`)).json).toEqual({ etag: 'ACAB' });
    const pulled = await rest('POST', `${D}/subscriptions/orders-pull:pull`, { maxMessages: 10 });
    expect(pulled.json.receivedMessages.map((m: any) => Buffer.from(m.message.data, 'base64').toString())).toEqual(['paid']);
    // gRPC sees the same resources under the same names.
    expect((await api.pub('getTopic', { topic: 'projects/example.com:scoped/topics/orders' })).labels).toEqual({ via: 'rest' });
    // An id cannot hold ":", so there it still starts the verb: an unknown one is no path.
    expect((await rest('GET', `${D}/topics/orders:nope`)).status).toBe(404);
  });

  it("schemas over Google's JSON API paths: get, list, commit, revisions, rollback, deleteRevision, validate", async () => {
    const name = 'projects/rest-fidelity/schemas/evolving';
    await rest('POST', `${P}/schemas?schemaId=evolving`, { type: 'AVRO', definition: AVRO });
    const v2 = JSON.stringify({
      type: 'record',
      name: 'Reading',
      fields: [
        { name: 'value', type: 'double' },
        { name: 'unit', type: 'string', default: 'C' },
      ],
    });
    const committed = await rest('POST', `${P}/schemas/evolving:commit`, { schema: { type: 'AVRO', definition: v2 } });
    expect(committed.json.definition).toBe(v2);
    const revisions = await rest('GET', `${P}/schemas/evolving:listRevisions?view=FULL&pageSize=1`);
    expect(revisions.json.schemas).toEqual([expect.objectContaining({ revisionId: committed.json.revisionId, definition: v2 })]);
    expect(revisions.json.nextPageToken).toBeTruthy();
    const basic = await rest('GET', `${P}/schemas?view=BASIC`);
    expect(basic.json.schemas.find((s: { name: string }) => s.name === name)).not.toHaveProperty('definition');
    const first = (await rest('GET', `${P}/schemas/evolving:listRevisions`)).json.schemas.at(-1).revisionId;
    const rolled = await rest('POST', `${P}/schemas/evolving:rollback`, { revisionId: first });
    expect(rolled.json.definition).toBe(AVRO);
    const deleted = await rest('DELETE', `${P}/schemas/evolving@${committed.json.revisionId}:deleteRevision`);
    expect(deleted.json.revisionId).toBe(committed.json.revisionId);
    expect((await rest('GET', `${P}/schemas/evolving@${committed.json.revisionId}`)).status).toBe(404);
    expect((await rest('POST', `${P}/schemas:validate`, { schema: { type: 'AVRO', definition: AVRO } })).json).toEqual({});
    const invalid = await rest('POST', `${P}/schemas:validate`, { schema: { type: 'PROTOCOL_BUFFER', definition: 'message {' } });
    expect(invalid.json.error.message).toMatch(/^schema\.definition: not a valid Protocol Buffer definition/);
    const message = await rest('POST', `${P}/schemas:validateMessage`, {
      name,
      encoding: 'JSON',
      message: Buffer.from('{"value": "x"}').toString('base64'),
    });
    expect(message.json.error.message).toMatch(/^message: does not match the schema at \.value/);
    expect((await rest('DELETE', `${P}/schemas/evolving`)).json).toEqual({});
    expect((await rest('GET', `${P}/schemas/evolving`)).status).toBe(404);
  });

  it('an enum in the query string may be given by number, as by name: view=2 is view=FULL', async () => {
    await rest('POST', `${P}/schemas?schemaId=viewed`, { type: 'AVRO', definition: AVRO });
    const byName = await rest('GET', `${P}/schemas?view=FULL`);
    const byNumber = await rest('GET', `${P}/schemas?view=2`);
    expect(byNumber.status).toBe(200);
    expect(byNumber.json).toEqual(byName.json);
    expect(byNumber.json.schemas).toContainEqual(
      expect.objectContaining({ name: 'projects/rest-fidelity/schemas/viewed', definition: AVRO }),
    );
    expect((await rest('GET', `${P}/schemas/viewed:listRevisions?view=1`)).json).toEqual(
      (await rest('GET', `${P}/schemas/viewed:listRevisions?view=BASIC`)).json,
    );
    const unknown = await rest('GET', `${P}/schemas/viewed?view=7`);
    expect(unknown.status).toBe(400);
    expect(unknown.json.error.message).toBe('view: must be one of SCHEMA_VIEW_UNSPECIFIED, BASIC, FULL, got 7');
  });

  it('IAM on topics, subscriptions and schemas: stored with an etag, every permission granted, a stale etag refused', async () => {
    await rest('PUT', `${P}/topics/guarded`, {});
    const empty = await rest('GET', `${P}/topics/guarded:getIamPolicy?options.requestedPolicyVersion=3`);
    expect(empty.json).toEqual({ etag: 'ACAB' });
    const policy = { bindings: [{ role: 'roles/pubsub.viewer', members: ['group:ops@example.com'] }] };
    const set = await rest('POST', `${P}/topics/guarded:setIamPolicy`, { policy });
    expect(set.json).toMatchObject(policy);
    expect(set.json.etag).toMatch(/^[A-Za-z0-9+/]+=*$/);
    expect((await rest('POST', `${P}/topics/guarded:getIamPolicy`, {})).json).toEqual(set.json);
    // The same policy over gRPC (google.iam.v1.IAMPolicy on the same port).
    const IAMPolicy = (loadPubsubProto() as any).google.iam.v1.IAMPolicy;
    const iam = new IAMPolicy(server.host, grpc.credentials.createInsecure());
    const viaGrpc = await new Promise<any>((resolve, reject) =>
      iam.getIamPolicy({ resource: 'projects/rest-fidelity/topics/guarded' }, (e: Error | null, r: unknown) =>
        e ? reject(e) : resolve(r),
      ),
    );
    iam.close();
    expect(viaGrpc.bindings).toEqual([expect.objectContaining(policy.bindings[0])]);
    expect(Buffer.from(viaGrpc.etag).toString('base64')).toBe(set.json.etag);
    const stale = await rest('POST', `${P}/topics/guarded:setIamPolicy`, { policy: { ...policy, etag: 'AAAAAAAAAAA=' } });
    expect(stale).toMatchObject({ status: 409, json: { error: { status: 'ABORTED' } } });
    const badRole = await rest('POST', `${P}/topics/guarded:setIamPolicy`, { policy: { bindings: [{ role: 'viewer', members: [] }] } });
    expect(badRole.json.error.message).toMatch(/^policy\.bindings\[0\]\.role: must be a role/);
    // Policy versions are 0, 1 and 3; a conditional binding needs 3 (google.iam.v1.Policy.version).
    const badVersion = await rest('POST', `${P}/topics/guarded:setIamPolicy`, { policy: { ...policy, version: 7 } });
    expect(badVersion).toMatchObject({ status: 400, json: { error: { message: 'policy.version: must be 0, 1 or 3, got 7' } } });
    const condition = { expression: 'request.time < timestamp("2030-01-01T00:00:00Z")', title: 'until 2030' };
    const conditional = { version: 1, bindings: [{ ...policy.bindings[0], condition }] };
    const unversioned = await rest('POST', `${P}/topics/guarded:setIamPolicy`, { policy: conditional });
    expect(unversioned.json.error.message).toBe(
      'policy.bindings[0].condition: a policy with conditional bindings must be version 3, got version 1',
    );
    expect((await rest('POST', `${P}/topics/guarded:setIamPolicy`, { policy: { ...conditional, version: 3 } })).status).toBe(200);
    const tested = await rest('POST', `${P}/topics/guarded:testIamPermissions`, {
      permissions: ['pubsub.topics.publish', 'pubsub.topics.attachSubscription'],
    });
    expect(tested.json).toEqual({ permissions: ['pubsub.topics.publish', 'pubsub.topics.attachSubscription'] });
    // IAM refuses wildcards in a permission (google.iam.v1.TestIamPermissionsRequest).
    for (const wildcard of ['*', 'pubsub.*', 'pubsub.topics.*'])
      expect(await rest('POST', `${P}/topics/guarded:testIamPermissions`, { permissions: ['pubsub.topics.get', wildcard] })).toMatchObject({
        status: 400,
        json: { error: { status: 'INVALID_ARGUMENT', message: `permissions[1]: wildcards are not allowed, got "${wildcard}"` } },
      });
    expect((await rest('GET', `${P}/subscriptions/nope:getIamPolicy`)).status).toBe(404);
    // A deleted topic's policy goes with it.
    await rest('DELETE', `${P}/topics/guarded`);
    await rest('PUT', `${P}/topics/guarded`, {});
    expect((await rest('GET', `${P}/topics/guarded:getIamPolicy`)).json).toEqual({ etag: 'ACAB' });
  });

  it("accepted fields come back: export service accounts, push oidcToken and noWrapper, Orderly's own extensions", async () => {
    await rest('PUT', `${P}/topics/fields`, {});
    const push = await rest('PUT', `${P}/subscriptions/fields-push`, {
      topic: 'fields',
      pushConfig: {
        pushEndpoint: 'http://127.0.0.1:9/push',
        oidcToken: { serviceAccountEmail: 'sa@p.iam.gserviceaccount.com', audience: 'aud' },
        noWrapper: { writeMetadata: true },
      },
    });
    expect(push.json.pushConfig).toEqual({
      pushEndpoint: 'http://127.0.0.1:9/push',
      oidcToken: { serviceAccountEmail: 'sa@p.iam.gserviceaccount.com', audience: 'aud' },
      noWrapper: { writeMetadata: true },
    });
    const both = await rest('PUT', `${P}/subscriptions/fields-both`, {
      topic: 'fields',
      pushConfig: { pushEndpoint: 'http://127.0.0.1:9/', pubsubWrapper: {}, noWrapper: {} },
    });
    expect(both.json.error.message).toMatch(/^pushConfig\.noWrapper: only one of pubsubWrapper, noWrapper may be set/);
    const mixed = await rest('POST', `${P}/topics/fields:publish`, {
      messages: [
        { data: 'QQ==', orderingKey: 'a' },
        { data: 'QQ==', orderingKey: 'b' },
      ],
    });
    expect(mixed.json.error.message).toBe('messages: all messages of one publish request must share an ordering key');
  });

  it('an export service account that cannot be one is refused, naming it, as the push one is', async () => {
    await rest('PUT', `${P}/topics/accounts`, {});
    const gcs = await rest('PUT', `${P}/subscriptions/accounts-gcs`, {
      topic: 'accounts',
      cloudStorageConfig: { bucket: 'accounts-bucket', serviceAccountEmail: 'not an email' },
    });
    expect(gcs.status).toBe(400);
    expect(gcs.json.error.message).toMatch(
      /^cloudStorageConfig\.serviceAccountEmail: .*must be a service account email, got "not an email"/,
    );
    const bq = await rest('PUT', `${P}/subscriptions/accounts-bq`, {
      topic: 'accounts',
      bigqueryConfig: { table: 'p.d.t', serviceAccountEmail: 'nope' },
    });
    expect(bq.status).toBe(400);
    expect(bq.json.error.message).toMatch(/^bigqueryConfig\.serviceAccountEmail: .*must be a service account email, got "nope"/);
    expect((await rest('GET', `${P}/subscriptions/accounts-gcs`)).status).toBe(404);
  });

  it('an int64 comes back exactly as given, past 2^53 too (cloudStorageConfig.maxMessages), over REST as over gRPC', async () => {
    await rest('PUT', `${P}/topics/int64`, {});
    for (const maxMessages of ['9223372036854775807', '9007199254740993', '1000']) {
      const id = `int64-${maxMessages}`;
      const created = await rest('PUT', `${P}/subscriptions/${id}`, {
        topic: 'int64',
        cloudStorageConfig: { bucket: 'int64-bucket', maxMessages },
      });
      expect(created.json.error).toBeUndefined();
      expect(created.json.cloudStorageConfig.maxMessages).toBe(maxMessages);
      expect((await rest('GET', `${P}/subscriptions/${id}`)).json.cloudStorageConfig.maxMessages).toBe(maxMessages);
      const viaGrpc = await api.sub('getSubscription', { subscription: `projects/rest-fidelity/subscriptions/${id}` });
      expect(viaGrpc.cloudStorageConfig.maxMessages).toBe(maxMessages);
    }
  });

  it('an attribute named __proto__ (or any other key) arrives and comes back as published, over REST as over gRPC', async () => {
    await rest('PUT', `${P}/topics/odd-keys`, {});
    await rest('PUT', `${P}/subscriptions/odd-keys-sub`, { topic: 'odd-keys' });
    const attributes = JSON.parse('{"__proto__":"p","constructor":"c","toString":"t"}') as Record<string, string>;
    expect(Object.keys(attributes)).toEqual(['__proto__', 'constructor', 'toString']);
    expect((await rest('POST', `${P}/topics/odd-keys:publish`, { messages: [{ data: 'QQ==', attributes }] })).status).toBe(200);
    const pulled = await rest('POST', `${P}/subscriptions/odd-keys-sub:pull`, { maxMessages: 10, returnImmediately: true });
    const delivered = pulled.json.receivedMessages[0].message.attributes as Record<string, string>;
    expect(Object.entries(delivered)).toEqual(Object.entries(attributes));
    // The same message through gRPC: the same attributes.
    const seek = await rest('POST', `${P}/subscriptions/odd-keys-sub:seek`, { time: '2000-01-01T00:00:00Z' });
    expect(seek.status).toBe(200);
    const { receivedMessages } = await api.sub('pull', {
      subscription: 'projects/rest-fidelity/subscriptions/odd-keys-sub',
      maxMessages: 10,
    });
    expect(Object.entries(receivedMessages[0].message.attributes as Record<string, string>)).toEqual(Object.entries(attributes));
  });
});

describe("Google's client over REST (its fallback transport, as where gRPC cannot run)", () => {
  it('creates, publishes, pulls and acks: it asks for enums as numbers, which it was refused (400 on $alt)', async () => {
    const authClient = new OAuth2Client();
    authClient.setCredentials({ access_token: 'local', expiry_date: Date.now() + 3_600_000 });
    // google-gax declares its own copy of google-auth-library's types (it pins a version): the same class.
    const options = { fallback: 'rest' as const, protocol: 'http', authClient: authClient as unknown as ClientConfig['authClient'] };
    const pubsub = new PubSub({ projectId: 'rest-client', apiEndpoint: server.host, ...options });
    const subscriber = new v1.SubscriberClient({ servicePath: '127.0.0.1', port: server.port, ...options });
    try {
      const [topic] = await pubsub.createTopic('orders');
      const [subscription] = await topic.createSubscription('orders-pull', { enableMessageOrdering: true });
      expect((await subscription.getMetadata())[0]).toMatchObject({ state: 'ACTIVE', enableMessageOrdering: true });
      topic.setPublishOptions({ messageOrdering: true });
      for (const n of [1, 2, 3]) await topic.publishMessage({ data: Buffer.from(`m${n}`), orderingKey: 'k' });
      const [pulled] = await subscriber.pull({ subscription: subscription.name, maxMessages: 10 });
      const received = pulled.receivedMessages ?? [];
      expect(received.map((m) => m.message?.data?.toString())).toEqual(['m1', 'm2', 'm3']);
      await subscriber.acknowledge({ subscription: subscription.name, ackIds: received.map((m) => m.ackId!) });
      // A POST without a body: the client sends "" (it was refused: "must be a JSON object").
      await pubsub.detachSubscription(subscription.name);
      expect((await subscription.getMetadata())[0].detached).toBe(true);
    } finally {
      await subscriber.close();
      await pubsub.close();
    }
    // What it asks for: the answer's enums as numbers (Subscription.State.ACTIVE = 1).
    const res = await fetch(`http://${server.host}/v1/projects/rest-client/subscriptions/orders-pull?$alt=json%3Benum-encoding=int`);
    expect(((await res.json()) as { state: unknown }).state).toBe(1);
  });
});
