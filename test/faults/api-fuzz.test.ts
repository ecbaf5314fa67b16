import * as grpc from '@grpc/grpc-js';
import fc from 'fast-check';
import { readFileSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/temp-dir.js';
import { startServeWithClients, type RawPubsubClients, type ServeProcess } from '../helpers/serve-process.js';

/**
 * Property-based fuzzing of a real `orderly serve` over every REST route and every gRPC method: valid,
 * wrong-typed and random requests, malformed paths, garbage protobuf, odd and oversized bodies. The
 * server must stay up, answer bad input only with typed 4xx / non-INTERNAL gRPC codes (never a 500),
 * survive no unexpected error, and keep its memory bounded.
 */

const PROJECT = 'fuzz-project';
const TOPICS = ['fuzz-topic-a', 'fuzz-topic-b'];
const SUBS = ['fuzz-sub-a', 'fuzz-sub-b', 'fuzz-sub-ordered'];
const BIG_TOPIC = 'fuzz-big-bodies';
const SCHEMAS = ['fuzz-schema'];
const AVRO = JSON.stringify({ type: 'record', name: 'R', fields: [{ name: 'n', type: 'long' }] });
const REST_BATCHES = 240;
const GRPC_BATCHES = 160;
const BATCH = 25;
/** 501: an RPC Orderly does not implement (UNIMPLEMENTED, as gRPC answers it). */
const OK_HTTP = new Set([200, 400, 404, 409, 413, 429, 501]);
const OK_GRPC = new Set([
  grpc.status.OK,
  grpc.status.INVALID_ARGUMENT,
  grpc.status.NOT_FOUND,
  grpc.status.ALREADY_EXISTS,
  grpc.status.FAILED_PRECONDITION,
  grpc.status.RESOURCE_EXHAUSTED,
  grpc.status.UNIMPLEMENTED,
  grpc.status.CANCELLED,
]);

let dir: ReturnType<typeof tempDir>;
let server: ServeProcess;
let api: RawPubsubClients;
let metricsUrl: string;
const agent = new Agent({ keepAlive: true, maxSockets: BATCH });
/** Ack ids seen in pulls, so acks and modacks sometimes name real leases. */
const ackIds: string[] = ['not-an-ack-id'];

/** Answers by status, printed at the end: the mix shows the run exercised success paths as well as refusals. */
const answers = new Map<string, number>();
const tally = (key: string) => answers.set(key, (answers.get(key) ?? 0) + 1);

const rssMiB = () => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${server.child.pid}/status`, 'utf8'))![1]) / 1024;

beforeAll(async () => {
  dir = tempDir();
  const job = join(dir.path, 'job.yaml');
  // The RSS bound below looks for leaks: at a fixed heap growth, not the 4x V8 allows a serving process
  // (HeapGrowth), whose garbage would read as growth.
  writeFileSync(
    job,
    stringify({ projectId: PROJECT, dataDir: './data', durability: 'process', metrics: { port: 0 }, memory: { heapGrowthPercent: 60 } }),
  );
  ({ server, api } = await startServeWithClients(['--config', job]));
  metricsUrl = JSON.parse(readFileSync(join(dir.path, 'data', 'orderly.lock'), 'utf8')).metrics;
});

afterAll(async () => {
  agent.destroy();
  await server?.stop();
  dir?.remove();
});

// ---- values ----

const id = (ids: string[]) =>
  fc.oneof({ weight: 6, arbitrary: fc.constantFrom(...ids) }, fc.string({ maxLength: 30 }), fc.stringMatching(/^[a-z][a-z0-9-]{2,12}$/));
const topicName = fc.oneof(
  { weight: 5, arbitrary: id(TOPICS).map((t) => `projects/${PROJECT}/topics/${t}`) },
  fc.string({ maxLength: 40 }),
);
const subName = fc.oneof(
  { weight: 5, arbitrary: id(SUBS).map((s) => `projects/${PROJECT}/subscriptions/${s}`) },
  fc.string({ maxLength: 40 }),
);
const anyJson = fc.jsonValue({ maxDepth: 3 });
/** A field's value: usually of the right kind, sometimes any JSON at all. */
const field = <T>(arb: fc.Arbitrary<T>) => fc.oneof({ weight: 4, arbitrary: arb }, { weight: 1, arbitrary: anyJson });
const int = fc.oneof(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), fc.constantFrom(-1, 0, 1, 10, 600, 601, 1000));
const durationJson = fc.oneof(
  int.map((n) => `${n}s`),
  fc.constantFrom('600s', '0.5s', '1e3s', '-1s', '10m', ''),
);
const labels = fc.dictionary(fc.string({ maxLength: 10 }), fc.string({ maxLength: 10 }), { maxKeys: 3 });
const pushUrl = fc.oneof(
  fc.constantFrom('http://127.0.0.1:9/push', 'ftp://x', 'http://169.254.169.254/', ''),
  fc.string({ maxLength: 20 }),
);
const pushConfigJson = fc.record({ pushEndpoint: field(pushUrl), attributes: field(labels) }, { requiredKeys: [] });
const base64 = fc.oneof(
  fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b).toString('base64')),
  fc.string({ maxLength: 20 }),
);

const subscriptionJson = fc.record(
  {
    topic: field(topicName),
    ackDeadlineSeconds: field(int),
    messageRetentionDuration: field(durationJson),
    enableMessageOrdering: field(fc.boolean()),
    retainAckedMessages: field(fc.boolean()),
    filter: field(fc.constantFrom('', 'attributes.k = "v"', 'hasPrefix(attributes.k, "a")', 'nonsense(', 'attributes:k')),
    labels: field(labels),
    pushConfig: field(pushConfigJson),
    deadLetterPolicy: field(fc.record({ deadLetterTopic: field(topicName), maxDeliveryAttempts: field(int) }, { requiredKeys: [] })),
    retryPolicy: field(fc.record({ minimumBackoff: field(durationJson), maximumBackoff: field(durationJson) }, { requiredKeys: [] })),
    expirationPolicy: field(fc.record({ ttl: field(durationJson) }, { requiredKeys: [] })),
    // Export configs are refused (no valid bucket or table here), so no export runner starts.
    cloudStorageConfig: field(
      fc.record({ bucket: fc.constantFrom('', 'X', 'no_such!'), maxBytes: field(fc.constantFrom('1000', 5)) }, { requiredKeys: [] }),
    ),
    bigqueryConfig: field(fc.record({ table: fc.constantFrom('', 'a.b', 'bad') }, { requiredKeys: [] })),
    kmsKeyName: fc.string({ maxLength: 5 }),
  },
  { requiredKeys: [] },
);

const schemaSettings = fc.record(
  {
    schema: field(fc.constantFrom(`projects/${PROJECT}/schemas/${SCHEMAS[0]}`, 'nope', '')),
    encoding: field(fc.constantFrom('JSON', 'BINARY', 'ENCODING_UNSPECIFIED', 'XML')),
  },
  { requiredKeys: [] },
);
const schemaJson = fc.record(
  {
    type: field(fc.constantFrom('AVRO', 'PROTOCOL_BUFFER', 'TYPE_UNSPECIFIED')),
    definition: field(fc.constantFrom(AVRO, '{"type": "record"}', 'syntax = "proto3"; message M { int64 n = 1; }', '')),
  },
  { requiredKeys: [] },
);
const policyJson = fc.record(
  {
    bindings: field(
      fc.array(
        fc.record({
          role: field(fc.constantFrom('roles/pubsub.viewer', 'viewer')),
          members: field(fc.array(fc.constantFrom('user:a@b.c', 'nobody'))),
        }),
        { maxLength: 2 },
      ),
    ),
    etag: field(fc.constantFrom('ACAB', 'AAAA', '!!')),
  },
  { requiredKeys: [] },
);

const restBody: Record<string, fc.Arbitrary<unknown>> = {
  topic: fc.record(
    { labels: field(labels), name: field(topicName), messageRetentionDuration: field(durationJson), schemaSettings: field(schemaSettings) },
    { requiredKeys: [] },
  ),
  schema: schemaJson,
  commit: fc.record({ schema: field(schemaJson) }, { requiredKeys: [] }),
  validateMessage: fc.record(
    {
      name: field(fc.constantFrom(`projects/${PROJECT}/schemas/${SCHEMAS[0]}`, 'x')),
      encoding: field(fc.constantFrom('JSON', 'BINARY', 7)),
      message: field(base64),
    },
    { requiredKeys: [] },
  ),
  setIam: fc.record(
    { policy: field(policyJson), updateMask: field(fc.constantFrom('bindings', 'etag,bindings', 'owner')) },
    { requiredKeys: [] },
  ),
  testIam: fc.record({ permissions: field(fc.array(fc.string({ maxLength: 20 }), { maxLength: 3 })) }, { requiredKeys: [] }),
  updateTopic: fc.record(
    {
      topic: field(fc.record({ labels: field(labels) }, { requiredKeys: [] })),
      updateMask: field(fc.constantFrom('labels', 'kmsKeyName', 'x', '')),
    },
    { requiredKeys: [] },
  ),
  publish: fc.record({
    messages: field(
      fc.array(
        field(
          fc.record(
            { data: field(base64), attributes: field(labels), orderingKey: field(fc.string({ maxLength: 5 })) },
            { requiredKeys: [] },
          ),
        ),
        { maxLength: 4 },
      ),
    ),
  }),
  subscription: subscriptionJson,
  updateSubscription: fc.record(
    {
      subscription: field(subscriptionJson),
      updateMask: field(fc.constantFrom('ackDeadlineSeconds', 'labels,pushConfig', 'filter', 'enableMessageOrdering', 'nope', '')),
    },
    { requiredKeys: [] },
  ),
  pull: fc.record({ returnImmediately: fc.constant(true), maxMessages: field(int) }, { requiredKeys: ['returnImmediately'] }),
  ack: fc.record({ ackIds: field(fc.array(fc.oneof(fc.constantFrom(...ackIds), fc.string()), { maxLength: 3 })) }, { requiredKeys: [] }),
  modack: fc.record(
    { ackIds: field(fc.array(fc.oneof(fc.constantFrom(...ackIds), fc.string()), { maxLength: 3 })), ackDeadlineSeconds: field(int) },
    { requiredKeys: [] },
  ),
  seek: fc.record(
    {
      time: field(
        fc.oneof(
          fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
          fc.string(),
        ),
      ),
      snapshot: fc.string({ maxLength: 5 }),
    },
    { requiredKeys: [] },
  ),
  modifyPushConfig: fc.record({ pushConfig: field(pushConfigJson) }, { requiredKeys: [] }),
  none: fc.constant(undefined),
};

// ---- REST ----

const segment = (ids: string[]) =>
  fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom(...ids) },
    fc.constantFrom('%', '%zz', '%E0%A4%A', '%C0%AF', '%00', '..', '%2F', '%F0%9F%98%80', 'a%2Fb%', 'goog-topic'),
    fc.string({ maxLength: 20 }).map(encodeURIComponent),
  );
const project = fc.oneof({ weight: 8, arbitrary: fc.constant(PROJECT) }, fc.constantFrom('%', 'other-project', '%zz', ''));
const listQuery = fc.constantFrom(
  '',
  '?pageSize=1',
  '?pageSize=-1',
  '?pageToken=bogus',
  '?page_size=2&alt=json',
  '?colour=red',
  '?prettyPrint=true',
);
const REST_ROUTES: [string[], string, (p: string, s: string) => string, string][] = [
  [['POST'], 'schema', (p, s) => `/v1/projects/${p}/schemas?schemaId=${s}`, 'sc'],
  [['GET', 'DELETE'], 'none', (p, s) => `/v1/projects/${p}/schemas/${s}`, 'sc'],
  [['GET'], 'none', (p) => `/v1/projects/${p}/schemas`, 'sc'],
  [['POST'], 'commit', (p, s) => `/v1/projects/${p}/schemas/${s}:commit`, 'sc'],
  [['GET'], 'none', (p, s) => `/v1/projects/${p}/schemas/${s}:listRevisions`, 'sc'],
  [['POST'], 'validateMessage', (p) => `/v1/projects/${p}/schemas:validateMessage`, 'sc'],
  [['GET', 'POST'], 'none', (p, s) => `/v1/projects/${p}/topics/${s}:getIamPolicy`, 't'],
  [['POST'], 'setIam', (p, s) => `/v1/projects/${p}/topics/${s}:setIamPolicy`, 't'],
  [['POST'], 'testIam', (p, s) => `/v1/projects/${p}/subscriptions/${s}:testIamPermissions`, 's'],
  [['GET'], 'none', (p, s) => `/v1/projects/${p}/snapshots/${s}`, 's'],
  [['PUT'], 'topic', (p, s) => `/v1/projects/${p}/topics/${s}`, 't'],
  [['GET', 'DELETE'], 'none', (p, s) => `/v1/projects/${p}/topics/${s}`, 't'],
  [['PATCH'], 'updateTopic', (p, s) => `/v1/projects/${p}/topics/${s}`, 't'],
  [['GET'], 'none', (p) => `/v1/projects/${p}/topics`, 't'],
  [['GET'], 'none', (p, s) => `/v1/projects/${p}/topics/${s}/subscriptions`, 't'],
  [['GET'], 'none', (p, s) => `/v1/projects/${p}/topics/${s}/snapshots`, 't'],
  [['POST'], 'publish', (p, s) => `/v1/projects/${p}/topics/${s}:publish`, 't'],
  [['PUT'], 'subscription', (p, s) => `/v1/projects/${p}/subscriptions/${s}`, 's'],
  [['GET', 'DELETE'], 'none', (p, s) => `/v1/projects/${p}/subscriptions/${s}`, 's'],
  [['PATCH'], 'updateSubscription', (p, s) => `/v1/projects/${p}/subscriptions/${s}`, 's'],
  [['GET'], 'none', (p) => `/v1/projects/${p}/subscriptions`, 's'],
  [['GET'], 'none', (p) => `/v1/projects/${p}/snapshots`, 's'],
  [['POST'], 'pull', (p, s) => `/v1/projects/${p}/subscriptions/${s}:pull`, 's'],
  [['POST'], 'ack', (p, s) => `/v1/projects/${p}/subscriptions/${s}:acknowledge`, 's'],
  [['POST'], 'modack', (p, s) => `/v1/projects/${p}/subscriptions/${s}:modifyAckDeadline`, 's'],
  [['POST'], 'seek', (p, s) => `/v1/projects/${p}/subscriptions/${s}:seek`, 's'],
  [['POST'], 'modifyPushConfig', (p, s) => `/v1/projects/${p}/subscriptions/${s}:modifyPushConfig`, 's'],
  [['POST'], 'none', (p, s) => `/v1/projects/${p}/subscriptions/${s}:detach`, 's'],
];

interface RestRequest {
  method: string;
  path: string;
  body: string | Buffer | undefined;
}

const restRequest: fc.Arbitrary<RestRequest> = fc.oneof(
  // A route with a body meant for it (valid or wrong-typed), as JSON.
  {
    weight: 12,
    arbitrary: fc.constantFrom(...REST_ROUTES).chain(([methods, body, path, kind]) =>
      fc.record({
        method: fc.oneof(
          { weight: 9, arbitrary: fc.constantFrom(...methods) },
          fc.constantFrom('GET', 'PUT', 'POST', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD'),
        ),
        path: fc
          .tuple(project, segment(kind === 't' ? TOPICS : kind === 's' ? SUBS : SCHEMAS), listQuery)
          .map(([p, s, q]) => `${path(p, s)}${path(p, s).includes('?') ? '' : q}`),
        body: restBody[body]!.map((b) => (b === undefined ? undefined : JSON.stringify(b))),
      }),
    ),
  },
  // Any JSON, or not JSON at all, on any route.
  {
    weight: 3,
    arbitrary: fc.record({
      method: fc.constantFrom('GET', 'PUT', 'POST', 'PATCH', 'DELETE'),
      path: fc.tuple(fc.constantFrom(...REST_ROUTES), project, segment([...TOPICS, ...SUBS])).map(([[, , path], p, s]) => path(p, s)),
      body: fc.oneof(
        anyJson.map((j) => JSON.stringify(j)),
        fc.string({ maxLength: 50 }),
        fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b)),
      ),
    }),
  },
  // Random paths.
  {
    weight: 1,
    arbitrary: fc.record({
      method: fc.constantFrom('GET', 'POST'),
      path: fc.oneof(
        fc.webPath(),
        fc.string({ maxLength: 40 }).map((s) => `/v1/${s}`),
      ),
      body: fc.constant(undefined),
    }),
  },
  // Big and oversized bodies, to a topic no subscription keeps messages of.
  {
    weight: 1,
    arbitrary: fc.record({
      method: fc.constant('POST'),
      path: fc.constant(`/v1/projects/${PROJECT}/topics/${BIG_TOPIC}:publish`),
      body: fc
        .oneof({ weight: 8, arbitrary: fc.constantFrom(64 * 1024, 1024 * 1024) }, { weight: 1, arbitrary: fc.constant(15 * 1024 * 1024) })
        .map((n) => `{"messages":[{"data":"${'A'.repeat(n)}"}]}`),
    }),
  },
);

function send(r: RestRequest): Promise<{ status: number; body: string }> {
  // Node refuses to send a path with spaces or control characters; escape those, keep everything else raw.
  const path = r.path.replace(/[^\x21-\x7e]/g, (c) => encodeURIComponent(c)) || '/';
  return new Promise((resolve, reject) => {
    const headers = r.body === undefined ? {} : { 'content-length': Buffer.byteLength(r.body) };
    const req = request({ host: '127.0.0.1', port: server.port, method: r.method, path, agent, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
      res.on('error', reject);
    });
    req.on('error', (e: NodeJS.ErrnoException) => {
      // An oversized body is refused before it is all sent: the connection closes under the writer.
      if ((e.code === 'EPIPE' || e.code === 'ECONNRESET') && r.body && r.body.length > 14 * 1024 * 1024) resolve({ status: 413, body: '' });
      else reject(e);
    });
    req.end(r.body);
  });
}

async function checkRest(r: RestRequest): Promise<void> {
  const { status, body } = await send(r);
  tally(`http ${status}`);
  const where = `${r.method} ${r.path} ${String(r.body ?? '').slice(0, 300)} -> ${status} ${body.slice(0, 300)}`;
  expect(OK_HTTP.has(status), where).toBe(true);
  if (r.method === 'HEAD' || (status === 413 && !body)) return;
  let json: any;
  expect(() => (json = JSON.parse(body)), where).not.toThrow();
  if (status === 200) {
    for (const m of json.receivedMessages ?? []) if (ackIds.length < 200) ackIds.push(m.ackId);
    return;
  }
  expect(json.error, where).toMatchObject({ code: status, status: expect.stringMatching(/^[A-Z_]+$/), message: expect.any(String) });
}

// ---- gRPC ----

const durationProto = fc.record({ seconds: fc.oneof(int.map(String), fc.constant('9999999999999')), nanos: int }, { requiredKeys: [] });
const subscriptionProto = fc.record(
  {
    name: subName,
    topic: topicName,
    ackDeadlineSeconds: int,
    messageRetentionDuration: durationProto,
    enableMessageOrdering: fc.boolean(),
    filter: fc.constantFrom('', 'attributes.k = "v"', 'bad('),
    labels,
    pushConfig: fc.record({ pushEndpoint: pushUrl, attributes: labels }, { requiredKeys: [] }),
    deadLetterPolicy: fc.record({ deadLetterTopic: topicName, maxDeliveryAttempts: int }, { requiredKeys: [] }),
    retryPolicy: fc.record({ minimumBackoff: durationProto, maximumBackoff: durationProto }, { requiredKeys: [] }),
    expirationPolicy: fc.record({ ttl: durationProto }, { requiredKeys: [] }),
    cloudStorageConfig: fc.record(
      { bucket: fc.constantFrom('', 'X'), maxBytes: fc.constantFrom('0', '-5', '99999999999999') },
      { requiredKeys: [] },
    ),
    detached: fc.boolean(),
  },
  { requiredKeys: [] },
);
const mask = fc.record({
  paths: fc.array(fc.constantFrom('ack_deadline_seconds', 'labels', 'push_config', 'filter', 'bigtable_config', 'x', ''), { maxLength: 3 }),
});
const someAckIds = fc.array(fc.oneof(fc.constantFrom(...ackIds), fc.string({ maxLength: 10 })), { maxLength: 3 });
const schemaProto = fc.record(
  { type: fc.constantFrom('AVRO', 'PROTOCOL_BUFFER', 'TYPE_UNSPECIFIED'), definition: fc.constantFrom(AVRO, 'message {', '') },
  { requiredKeys: [] },
);
const schemaName = fc.oneof(fc.constant(`projects/${PROJECT}/schemas/${SCHEMAS[0]}`), fc.string({ maxLength: 30 }));
const GRPC_METHODS: [keyof RawPubsubClients, string, fc.Arbitrary<object>][] = [
  [
    'schemaService',
    'createSchema',
    fc.record(
      { parent: fc.constantFrom(`projects/${PROJECT}`, 'x'), schemaId: fc.stringMatching(/^[a-z][a-z0-9-]{2,10}$/), schema: schemaProto },
      { requiredKeys: [] },
    ),
  ],
  [
    'schemaService',
    'getSchema',
    fc.record({ name: schemaName, view: fc.constantFrom('FULL', 'BASIC', 'SCHEMA_VIEW_UNSPECIFIED') }, { requiredKeys: [] }),
  ],
  [
    'schemaService',
    'listSchemas',
    fc.record(
      { parent: fc.constantFrom(`projects/${PROJECT}`, 'x'), pageSize: int, pageToken: fc.string({ maxLength: 8 }) },
      { requiredKeys: [] },
    ),
  ],
  ['schemaService', 'commitSchema', fc.record({ name: schemaName, schema: schemaProto }, { requiredKeys: [] })],
  [
    'schemaService',
    'validateMessage',
    fc.record(
      {
        parent: fc.constant(`projects/${PROJECT}`),
        name: schemaName,
        message: fc.uint8Array({ maxLength: 20 }).map((b) => Buffer.from(b)),
        encoding: fc.constantFrom('JSON', 'BINARY'),
      },
      { requiredKeys: [] },
    ),
  ],
  ['iam', 'getIamPolicy', fc.record({ resource: fc.oneof(topicName, subName, schemaName) })],
  [
    'iam',
    'setIamPolicy',
    fc.record(
      {
        resource: fc.oneof(topicName, subName),
        policy: fc.record({
          bindings: fc.array(
            fc.record({ role: fc.constantFrom('roles/pubsub.viewer', 'x'), members: fc.array(fc.constantFrom('user:a@b.c', 'z')) }),
            { maxLength: 2 },
          ),
        }),
      },
      { requiredKeys: [] },
    ),
  ],
  [
    'iam',
    'testIamPermissions',
    fc.record({ resource: fc.oneof(topicName, subName), permissions: fc.array(fc.string({ maxLength: 10 }), { maxLength: 3 }) }),
  ],
  ['publisher', 'createTopic', fc.record({ name: topicName, labels, kmsKeyName: fc.constantFrom('', 'k') }, { requiredKeys: [] })],
  [
    'publisher',
    'updateTopic',
    fc.record({ topic: fc.record({ name: topicName, labels }, { requiredKeys: [] }), updateMask: mask }, { requiredKeys: [] }),
  ],
  [
    'publisher',
    'publish',
    fc.record({
      topic: topicName,
      messages: fc.array(
        fc.record(
          {
            data: fc.uint8Array({ maxLength: 500 }).map((b) => Buffer.from(b)),
            attributes: labels,
            orderingKey: fc.constantFrom('', 'k1', 'k2'),
          },
          { requiredKeys: [] },
        ),
        {
          maxLength: 4,
        },
      ),
    }),
  ],
  ['publisher', 'getTopic', fc.record({ topic: topicName })],
  ['publisher', 'listTopics', fc.record({ project: fc.oneof(fc.constant(`projects/${PROJECT}`), fc.string()), pageSize: int })],
  ['publisher', 'listTopicSubscriptions', fc.record({ topic: topicName })],
  ['publisher', 'listTopicSnapshots', fc.record({ topic: topicName })],
  ['publisher', 'deleteTopic', fc.record({ topic: topicName })],
  ['publisher', 'detachSubscription', fc.record({ subscription: subName })],
  ['subscriber', 'createSubscription', subscriptionProto],
  ['subscriber', 'getSubscription', fc.record({ subscription: subName })],
  ['subscriber', 'updateSubscription', fc.record({ subscription: subscriptionProto, updateMask: mask }, { requiredKeys: [] })],
  ['subscriber', 'listSubscriptions', fc.record({ project: fc.oneof(fc.constant(`projects/${PROJECT}`), fc.string()) })],
  ['subscriber', 'deleteSubscription', fc.record({ subscription: subName })],
  ['subscriber', 'modifyAckDeadline', fc.record({ subscription: subName, ackIds: someAckIds, ackDeadlineSeconds: int })],
  ['subscriber', 'acknowledge', fc.record({ subscription: subName, ackIds: someAckIds })],
  ['subscriber', 'pull', fc.record({ subscription: subName, returnImmediately: fc.constant(true), maxMessages: int })],
  [
    'subscriber',
    'modifyPushConfig',
    fc.record(
      { subscription: subName, pushConfig: fc.record({ pushEndpoint: pushUrl, attributes: labels }, { requiredKeys: [] }) },
      { requiredKeys: ['subscription'] },
    ),
  ],
  [
    'subscriber',
    'seek',
    fc.record(
      { subscription: subName, time: fc.record({ seconds: fc.oneof(int.map(String), fc.constant('-62135596801')), nanos: int }) },
      { requiredKeys: ['subscription'] },
    ),
  ],
  ['subscriber', 'getSnapshot', fc.record({ snapshot: fc.string() })],
  ['subscriber', 'listSnapshots', fc.record({ project: fc.string() })],
  ['subscriber', 'createSnapshot', fc.record({ name: fc.string(), subscription: subName })],
  ['subscriber', 'deleteSnapshot', fc.record({ snapshot: fc.string() })],
];
const GRPC_PATHS = [
  ...[
    'CreateTopic',
    'UpdateTopic',
    'Publish',
    'GetTopic',
    'ListTopics',
    'ListTopicSubscriptions',
    'ListTopicSnapshots',
    'DeleteTopic',
    'DetachSubscription',
  ].map((m) => `/google.pubsub.v1.Publisher/${m}`),
  ...[
    'CreateSubscription',
    'GetSubscription',
    'UpdateSubscription',
    'ListSubscriptions',
    'DeleteSubscription',
    'ModifyAckDeadline',
    'Acknowledge',
    'Pull',
    'ModifyPushConfig',
    'Seek',
  ].map((m) => `/google.pubsub.v1.Subscriber/${m}`),
];

type GrpcCall =
  | { kind: 'unary'; client: 'publisher' | 'subscriber' | 'schemaService' | 'iam'; method: string; request: object }
  | { kind: 'garbage'; path: string; bytes: Uint8Array }
  | { kind: 'stream'; requests: object[] };

const streamRequest = fc.record(
  {
    subscription: subName,
    streamAckDeadlineSeconds: fc.oneof({ weight: 3, arbitrary: fc.constant(10) }, int),
    ackIds: someAckIds,
    modifyDeadlineAckIds: someAckIds,
    modifyDeadlineSeconds: fc.array(int, { maxLength: 3 }),
    maxOutstandingMessages: fc.constantFrom('0', '-1', '5', '99999999999'),
  },
  { requiredKeys: [] },
);
const grpcCall: fc.Arbitrary<GrpcCall> = fc.oneof(
  {
    weight: 12,
    arbitrary: fc
      .constantFrom(...GRPC_METHODS)
      .chain(([client, method, arb]) => arb.map((request) => ({ kind: 'unary' as const, client: client as 'publisher', method, request }))),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('garbage' as const),
      path: fc.constantFrom(...GRPC_PATHS),
      bytes: fc.uint8Array({ minLength: 1, maxLength: 200 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('stream' as const), requests: fc.array(streamRequest, { minLength: 1, maxLength: 4 }) }),
  },
);

async function checkGrpc(c: GrpcCall): Promise<void> {
  const where = JSON.stringify(c, (_k, v) => (v?.type === 'Buffer' ? `<${v.data.length} bytes>` : v)).slice(0, 400);
  const code = await new Promise<{ code: number; details?: string }>((resolve) => {
    const done = (e: grpc.ServiceError | null, r?: unknown) => {
      if (!e && r && typeof r === 'object' && 'receivedMessages' in r)
        for (const m of (r as any).receivedMessages) if (ackIds.length < 200) ackIds.push(m.ackId);
      resolve(e ? { code: e.code, details: e.details } : { code: grpc.status.OK });
    };
    if (c.kind === 'unary') {
      // The client's serializer may refuse a value (an out-of-range int64): then nothing reaches the server.
      try {
        (api[c.client] as any)[c.method](c.request, done);
      } catch {
        resolve({ code: grpc.status.OK });
      }
    } else if (c.kind === 'garbage') {
      api.subscriber.makeUnaryRequest(
        c.path,
        (b: Uint8Array) => Buffer.from(b),
        (b: Buffer) => b,
        c.bytes,
        done,
      );
    } else {
      const stream = api.subscriber.streamingPull();
      let settled = false;
      const finish = (s: { code: number; details?: string }) => {
        if (!settled) resolve(s);
        settled = true;
      };
      stream.on('data', () => undefined);
      stream.on('error', (e: grpc.ServiceError) => finish({ code: e.code, details: e.details }));
      stream.on('status', (s: grpc.StatusObject) => finish(s));
      try {
        for (const r of c.requests) stream.write(r);
      } catch {
        // A value the client cannot serialize.
      }
      setTimeout(() => stream.cancel(), 50);
    }
  });
  tally(`grpc ${grpc.status[code.code]}`);
  expect(OK_GRPC.has(code.code), `${where} -> ${code.code} ${code.details}`).toBe(true);
}

async function unexpectedErrors(): Promise<number> {
  const text = await (await fetch(`${metricsUrl}/metrics`)).text();
  return Number(/^orderly_unexpected_errors_total (\d+)/m.exec(text)![1]);
}

describe('fuzzing the endpoint (issue #9.5)', () => {
  it(`${(REST_BATCHES + GRPC_BATCHES) * BATCH} random requests over REST and gRPC: typed answers only, the server stays up, memory stays bounded`, async () => {
    for (const t of [...TOPICS, BIG_TOPIC]) await send({ method: 'PUT', path: `/v1/projects/${PROJECT}/topics/${t}`, body: '{}' });
    for (const s of SCHEMAS)
      await send({
        method: 'POST',
        path: `/v1/projects/${PROJECT}/schemas?schemaId=${s}`,
        body: JSON.stringify({ type: 'AVRO', definition: AVRO }),
      });
    for (const [i, s] of SUBS.entries()) {
      const body = { topic: `projects/${PROJECT}/topics/${TOPICS[i % 2]}`, enableMessageOrdering: s.endsWith('ordered') };
      await send({ method: 'PUT', path: `/v1/projects/${PROJECT}/subscriptions/${s}`, body: JSON.stringify(body) });
    }
    let requests = 0;
    /** `runs` batches of BATCH concurrent requests from `arb`, each answer checked by `check`. */
    const fuzz = <T>(arb: fc.Arbitrary<T>, check: (r: T) => Promise<void>, runs: number) =>
      fc.assert(
        fc.asyncProperty(fc.array(arb, { minLength: BATCH, maxLength: BATCH }), async (batch) => {
          requests += batch.length;
          await Promise.all(batch.map(check));
        }),
        { numRuns: runs, endOnFailure: true },
      );
    // Warm up with the same mix first: the heap settles at its high-water mark (1 MiB bodies, 25 at a
    // time) within the first thousand requests; growth after that is what a leak would show.
    await fuzz(restRequest, checkRest, 40);
    await fuzz(grpcCall, checkGrpc, 10);
    const rssBefore = rssMiB();
    const warmUp = requests;

    await fuzz(restRequest, checkRest, REST_BATCHES);
    await fuzz(grpcCall, checkGrpc, GRPC_BATCHES);
    requests -= warmUp;

    expect(requests).toBeGreaterThanOrEqual(10_000);
    expect(server.alive()).toBe(true);
    expect(await unexpectedErrors()).toBe(0);
    // Still serving: a plain publish and pull round trip.
    await send({ method: 'PUT', path: `/v1/projects/${PROJECT}/topics/fuzz-final`, body: '{}' });
    expect(
      (await send({ method: 'POST', path: `/v1/projects/${PROJECT}/topics/fuzz-final:publish`, body: '{"messages":[{"data":"QQ=="}]}' }))
        .status,
    ).toBe(200);
    const growth = rssMiB() - rssBefore;
    console.log(
      `fuzz: ${requests} requests, RSS ${rssBefore.toFixed(0)} -> ${(rssBefore + growth).toFixed(0)} MiB, answers ${JSON.stringify(Object.fromEntries([...answers].sort()))}`,
    );
    expect(growth, `RSS grew by ${growth.toFixed(0)} MiB`).toBeLessThan(100);
  }, 180_000);
});
