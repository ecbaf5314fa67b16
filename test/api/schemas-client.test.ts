import { Encodings, PubSub, SchemaTypes, type Message } from '@google-cloud/pubsub';
import avro from 'avsc';
import protobuf from 'protobufjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/wait-for.js';
import { startServe, type ServeProcess } from '../helpers/serve-process.js';

/**
 * Issue #13 acceptance, through Google's Node client unchanged against a real `orderly serve`: schemas
 * (Avro and proto) on topics, refused and accepted publishes, the schema attributes on delivered
 * messages (also after a restart), paging, IAM and topic retention.
 */
let server: ServeProcess;
let pubsub: PubSub;
const PROJECT = 'schema-project';

beforeAll(async () => {
  server = await startServe();
  process.env.METADATA_SERVER_DETECTION = 'none';
  pubsub = new PubSub({ projectId: PROJECT, apiEndpoint: server.host, emulatorMode: true });
});

afterAll(async () => {
  await pubsub?.close();
  await server?.stop();
});

const AVRO = JSON.stringify({
  type: 'record',
  name: 'Order',
  fields: [
    { name: 'id', type: 'string' },
    { name: 'qty', type: 'int' },
  ],
});
const PROTO = 'syntax = "proto3"; message Order { string id = 1; int32 qty = 2; }';

/** Receives `count` messages on a new subscription of `topic`, acking them. */
async function receive(topicName: string, subscription: string, publish: () => Promise<unknown>, count = 1): Promise<Message[]> {
  const [sub] = await pubsub.topic(topicName).createSubscription(subscription);
  await publish();
  const got: Message[] = [];
  sub.on('message', (m: Message) => {
    got.push(m);
    m.ack();
  });
  await waitFor(`${count} message(s) on ${subscription}`, () => got.length >= count, 30_000);
  await sub.close();
  return got;
}

describe("schemas through Google's client (issue #13)", () => {
  it('an Avro schema on a topic: a bad publish is refused naming the message, a good one arrives with the schema attributes', async () => {
    const schema = await pubsub.createSchema('orders-avro', SchemaTypes.Avro, AVRO);
    const [info] = await Promise.all([schema.get()]);
    expect(info).toMatchObject({ name: `projects/${PROJECT}/schemas/orders-avro`, type: 'AVRO', definition: AVRO });
    expect(info.revisionId).toMatch(/^[0-9a-f]{8}$/);
    const [topic] = await pubsub.createTopic({
      name: 'orders-avro-topic',
      schemaSettings: { schema: await schema.getName(), encoding: Encodings.Json },
    });
    const [meta] = await topic.getMetadata();
    expect(meta.schemaSettings).toMatchObject({ schema: `projects/${PROJECT}/schemas/orders-avro`, encoding: 'JSON' });

    await expect(topic.publishMessage({ json: { id: 'a-1', qty: 'two' } })).rejects.toMatchObject({
      code: 3,
      details: expect.stringMatching(/^messages\[0\]\.data: does not match the schema at \.qty/),
    });
    const [message] = await receive('orders-avro-topic', 'orders-avro-sub', () => topic.publishMessage({ json: { id: 'a-1', qty: 2 } }));
    expect(JSON.parse(message!.data.toString())).toEqual({ id: 'a-1', qty: 2 });
    expect(message!.attributes).toEqual({
      googclient_schemaname: `projects/${PROJECT}/schemas/orders-avro`,
      googclient_schemarevisionid: info.revisionId,
      googclient_schemaencoding: 'JSON',
    });
  }, 60_000);

  it('a proto schema with BINARY encoding validates the wire format', async () => {
    const schema = await pubsub.createSchema('orders-proto', SchemaTypes.ProtocolBuffer, PROTO);
    const [topic] = await pubsub.createTopic({
      name: 'orders-proto-topic',
      schemaSettings: { schema: await schema.getName(), encoding: Encodings.Binary },
    });
    const Order = protobuf.parse(PROTO).root.lookupType('Order');
    // Field 7 is not declared: Pub/Sub refuses it (an ordinary parser would keep it as unknown).
    const unknownField = Buffer.from([0x38, 0x01]);
    await expect(topic.publishMessage({ data: unknownField })).rejects.toMatchObject({
      code: 3,
      details: expect.stringContaining('messages[0].data'),
    });
    const good = Buffer.from(Order.encode(Order.create({ id: 'p-1', qty: 5 })).finish());
    const [message] = await receive('orders-proto-topic', 'orders-proto-sub', () => topic.publishMessage({ data: good }));
    expect(Order.toObject(Order.decode(message!.data))).toEqual({ id: 'p-1', qty: 5 });
    expect(message!.attributes).toMatchObject({
      googclient_schemaname: `projects/${PROJECT}/schemas/orders-proto`,
      googclient_schemaencoding: 'BINARY',
    });
    // Avro data is not proto data: the schema is what decides.
    const avroBytes = avro.Type.forSchema(JSON.parse(AVRO) as avro.Schema).toBuffer({ id: 'x', qty: 1 });
    await expect(topic.publishMessage({ data: Buffer.concat([avroBytes, Buffer.from([0xff])]) })).rejects.toMatchObject({ code: 3 });
  }, 60_000);

  it('revisions, validation calls and deletion: a deleted schema leaves its topic at _deleted-schema_', async () => {
    const schema = await pubsub.createSchema('evolving', SchemaTypes.Avro, AVRO);
    await pubsub.validateSchema({ type: SchemaTypes.Avro, definition: AVRO });
    await expect(pubsub.validateSchema({ type: SchemaTypes.Avro, definition: '{"type": "record"}' })).rejects.toMatchObject({ code: 3 });
    // The message is bytes; the client sends a string as base64.
    const json = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64');
    await schema.validateMessage(json({ id: 'v', qty: 1 }), Encodings.Json);
    await expect(schema.validateMessage(json({ id: 'v' }), Encodings.Json)).rejects.toMatchObject({
      code: 3,
      details: expect.stringMatching(/^message: does not match the schema/),
    });
    const [topic] = await pubsub.createTopic({
      name: 'evolving-topic',
      schemaSettings: { schema: await schema.getName(), encoding: Encodings.Json },
    });
    const schemas: string[] = [];
    for await (const s of pubsub.listSchemas()) schemas.push(s.name!);
    expect(schemas).toEqual(expect.arrayContaining([`projects/${PROJECT}/schemas/evolving`, `projects/${PROJECT}/schemas/orders-avro`]));
    await schema.delete();
    const [meta] = await topic.getMetadata();
    expect(meta.schemaSettings?.schema).toBe('_deleted-schema_');
    await expect(topic.publishMessage({ json: { id: 'x', qty: 1 } })).rejects.toMatchObject({ code: 5 });
  }, 60_000);

  it('getTopics({pageSize: 2}) pages', async () => {
    for (const t of ['page-a', 'page-b', 'page-c', 'page-d', 'page-e']) await pubsub.createTopic(t);
    const all = (await pubsub.getTopics())[0].map((t) => t.name);
    expect(all.length).toBeGreaterThanOrEqual(5);
    // With a page size the client fetches one page and hands back the query for the next.
    const [first, next] = await pubsub.getTopics({ pageSize: 2 });
    expect(first).toHaveLength(2);
    let query = next as { pageToken?: string } | null;
    expect(query?.pageToken).toBeTruthy();
    const names = first.map((t) => t.name);
    while (query?.pageToken) {
      const [page, after] = await pubsub.getTopics({ pageToken: query.pageToken, pageSize: 2, autoPaginate: false });
      expect(page.length).toBeLessThanOrEqual(2);
      names.push(...page.map((t) => t.name));
      query = after as { pageToken?: string } | null;
    }
    expect(names).toEqual(all);
    expect(names).toEqual([...names].sort());
  }, 60_000);

  it('IAM: policies are stored and returned, and every permission asked is granted', async () => {
    const [topic] = await pubsub.createTopic('iam-topic');
    const [empty] = await topic.iam.getPolicy();
    expect(empty.bindings ?? []).toEqual([]);
    const [set] = await topic.iam.setPolicy({ bindings: [{ role: 'roles/pubsub.publisher', members: ['user:ada@example.com'] }] });
    expect(set.bindings).toEqual([expect.objectContaining({ role: 'roles/pubsub.publisher', members: ['user:ada@example.com'] })]);
    const [read] = await topic.iam.getPolicy();
    expect(read.bindings).toEqual(set.bindings);
    expect(Buffer.from(read.etag as Uint8Array).equals(Buffer.from(set.etag as Uint8Array))).toBe(true);
    const [granted] = await topic.iam.testPermissions(['pubsub.topics.publish', 'pubsub.topics.delete']);
    expect(granted).toEqual({ 'pubsub.topics.publish': true, 'pubsub.topics.delete': true });
    await expect(pubsub.topic('no-such-topic').iam.getPolicy()).rejects.toMatchObject({ code: 5 });
  }, 60_000);
});
