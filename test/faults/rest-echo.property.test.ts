import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPubsubEndpoint } from '../../src/api/endpoint.js';
import type { PubSubCore } from '../../src/core/pubsub-core.js';
import { openCore } from '../helpers/core.js';
import { tempDir } from '../helpers/temp-dir.js';

/**
 * No silent field drop (issue #13): random valid topic and subscription bodies over REST are answered
 * with every field given (as proto3 JSON writes it back: defaults left out, short names made full), and
 * GET returns exactly what the create answered; an update changes exactly its mask. Random invalid bodies
 * are a 400 naming the field, and store nothing. The endpoint runs in this process on a real store, so
 * hundreds of cases take a few seconds.
 */
const PROJECT = 'echo-project';
const P = `/v1/projects/${PROJECT}`;
const AVRO_V1 = JSON.stringify({ type: 'record', name: 'E', fields: [{ name: 'n', type: 'long' }] });
const AVRO_V2 = JSON.stringify({
  type: 'record',
  name: 'E',
  fields: [
    { name: 'n', type: 'long' },
    { name: 'm', type: 'long', default: 0 },
  ],
});

let dir: ReturnType<typeof tempDir>;
let core: PubSubCore;
let endpoint: { port: number; close(): Promise<void> };
let revisions: string[];
let counter = 0;

beforeAll(async () => {
  dir = tempDir();
  ({ core } = await openCore(dir.path));
  endpoint = await startPubsubEndpoint(core, { host: '127.0.0.1', port: 0 });
  await rest('PUT', `${P}/topics/echo-topic`, {});
  await rest('PUT', `${P}/topics/echo-dead`, {});
  const first = await rest('POST', `${P}/schemas?schemaId=echo-schema`, { type: 'AVRO', definition: AVRO_V1 });
  const second = await rest('POST', `${P}/schemas/echo-schema:commit`, { schema: { type: 'AVRO', definition: AVRO_V2 } });
  revisions = [first.json.revisionId, second.json.revisionId];
});

afterAll(async () => {
  await endpoint?.close();
  await core?.close();
  dir?.remove();
});

async function rest(method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(`http://127.0.0.1:${endpoint.port}${path}`, {
    method,
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}

const seconds = (min: number, max: number) => fc.integer({ min, max }).map((n) => `${n}s`);
// Label keys and values as Google Cloud's rules allow them (anything else is refused: see bad-input.test.ts).
const labels = fc.dictionary(fc.stringMatching(/^[a-z][a-z0-9_-]{0,10}$/), fc.stringMatching(/^[a-z0-9_-]{0,12}$/), { maxKeys: 3 });

const topicBody = fc.record(
  {
    labels,
    messageRetentionDuration: seconds(600, 31 * 86400),
    schemaSettings: fc.record(
      {
        schema: fc.constant(`projects/${PROJECT}/schemas/echo-schema`),
        encoding: fc.constantFrom('JSON', 'BINARY'),
        firstRevisionId: fc.constantFrom(undefined, 0).map((i) => (i === undefined ? undefined : revisions[i])),
        lastRevisionId: fc.constantFrom(undefined, 1).map((i) => (i === undefined ? undefined : revisions[i])),
      },
      { requiredKeys: ['schema', 'encoding'] },
    ),
  },
  { requiredKeys: [] },
);

const retryPolicy = fc
  .tuple(fc.integer({ min: 0, max: 600 }), fc.integer({ min: 0, max: 600 }))
  .map(([a, b]) => ({ minimumBackoff: `${Math.min(a, b)}s`, maximumBackoff: `${Math.max(a, b)}s` }));
const pushConfig = fc.record(
  {
    pushEndpoint: fc.constantFrom('http://127.0.0.1:9/push', 'https://push.example.com/x'),
    attributes: fc.dictionary(
      fc.stringMatching(/^x-[a-z]{1,8}$/),
      // eslint-disable-next-line no-control-regex -- push attributes become header values, which refuse control characters
      fc.string({ maxLength: 8 }).filter((v) => !/[\0-\x1f\x7f]/.test(v)),
      { maxKeys: 2 },
    ),
    oidcToken: fc.record({ serviceAccountEmail: fc.constant('sa@p.iam.gserviceaccount.com'), audience: fc.string({ maxLength: 8 }) }),
    noWrapper: fc.record({ writeMetadata: fc.boolean() }),
  },
  { requiredKeys: ['pushEndpoint'] },
);
const bigqueryConfig = fc.record(
  {
    table: fc.constant('p.d.t'),
    writeMetadata: fc.boolean(),
    useTableSchema: fc.boolean(),
    serviceAccountEmail: fc.constant('bq@p.iam.gserviceaccount.com'),
  },
  { requiredKeys: ['table'] },
);
const cloudStorageConfig = fc.record(
  {
    bucket: fc.constant('bucket-a'),
    filenamePrefix: fc.constantFrom('a/', 'x-'),
    filenameSuffix: fc.constantFrom('.avro', '_z'),
    avroConfig: fc.record({ writeMetadata: fc.boolean() }),
    maxDuration: seconds(60, 600),
    maxBytes: fc.integer({ min: 1000, max: 10 ** 9 }).map(String),
    maxMessages: fc.integer({ min: 1000, max: 10 ** 6 }).map(String),
    serviceAccountEmail: fc.constant('gcs@p.iam.gserviceaccount.com'),
  },
  { requiredKeys: ['bucket'] },
);
const subscriptionBody = fc
  .record(
    {
      topic: fc.constantFrom('echo-topic', `projects/${PROJECT}/topics/echo-topic`),
      ackDeadlineSeconds: fc.integer({ min: 10, max: 600 }),
      retainAckedMessages: fc.boolean(),
      messageRetentionDuration: seconds(600, 31 * 86400),
      labels,
      enableMessageOrdering: fc.boolean(),
      expirationPolicy: fc.oneof(
        fc.constant({}),
        seconds(31 * 86400, 365 * 86400).map((ttl) => ({ ttl })),
      ),
      filter: fc.constantFrom('', 'attributes.k = "v"', 'hasPrefix(attributes.k, "a") AND NOT attributes:z'),
      deadLetterPolicy: fc.record({
        deadLetterTopic: fc.constant(`projects/${PROJECT}/topics/echo-dead`),
        maxDeliveryAttempts: fc.integer({ min: 5, max: 100 }),
      }),
      retryPolicy,
      enableExactlyOnceDelivery: fc.boolean(),
      delivery: fc.oneof(
        fc.constant({}),
        pushConfig.map((p) => ({ pushConfig: p })),
        bigqueryConfig.map((b) => ({ bigqueryConfig: b })),
        cloudStorageConfig.map((c) => ({ cloudStorageConfig: c })),
      ),
    },
    { requiredKeys: ['topic'] },
  )
  // Exactly-once only on pull subscriptions: Pub/Sub refuses it beside push or export delivery.
  .map(({ delivery = {}, enableExactlyOnceDelivery, ...rest }) =>
    Object.keys(delivery).length ? { ...rest, ...delivery } : { ...rest, enableExactlyOnceDelivery },
  );

/** Expects `got` to hold everything `sent` set: proto3 JSON leaves out defaults (false, 0, "", empty maps). */
function expectEcho(sent: unknown, got: unknown, path: string): void {
  const emptyMap = isPlainObject(sent) && !Object.keys(sent).length && /(^|\.)(labels|attributes)$/.test(path);
  if (sent === undefined || sent === false || sent === 0 || sent === '' || emptyMap) {
    if (got !== undefined && !isPlainObject(sent)) expect(got, path).toEqual(sent);
    return;
  }
  if (isPlainObject(sent)) {
    expect(isPlainObject(got), `${path} is missing from ${JSON.stringify(got)}`).toBe(true);
    for (const [k, v] of Object.entries(sent)) expectEcho(v, (got as Record<string, unknown>)[k], `${path}.${k}`);
    return;
  }
  expect(got, path).toEqual(sent);
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
const full = (body: { topic: string }) => ({
  ...body,
  topic: body.topic.startsWith('projects/') ? body.topic : `projects/${PROJECT}/topics/${body.topic}`,
});

describe('REST: what is accepted comes back (issue #13)', () => {
  it('topics: create echoes every field, GET equals the create, PATCH changes exactly its mask', async () => {
    await fc.assert(
      fc.asyncProperty(
        topicBody,
        topicBody,
        fc.subarray(['labels', 'messageRetentionDuration', 'schemaSettings'], { minLength: 1 }),
        async (body, next, mask) => {
          const path = `${P}/topics/echo-t${++counter}`;
          const created = await rest('PUT', path, body);
          expect(created.status, JSON.stringify(created.json)).toBe(200);
          expectEcho(body, created.json, 'topic');
          expect((await rest('GET', path)).json).toEqual(created.json);
          const patched = await rest('PATCH', path, { topic: next, updateMask: mask.join(',') });
          expect(patched.status, JSON.stringify(patched.json)).toBe(200);
          for (const field of ['labels', 'messageRetentionDuration', 'schemaSettings'] as const) {
            if (mask.includes(field)) expectEcho(next[field], patched.json[field], field);
            else expect(patched.json[field], field).toEqual(created.json[field]);
          }
          expect((await rest('GET', path)).json).toEqual(patched.json);
        },
      ),
      { numRuns: 60 },
    );
  });

  it("subscriptions: create echoes every field (a short topic name in the URL's project), GET equals the create", async () => {
    await fc.assert(
      fc.asyncProperty(subscriptionBody, async (body) => {
        const path = `${P}/subscriptions/echo-s${++counter}`;
        const created = await rest('PUT', path, body);
        expect(created.status, JSON.stringify(created.json)).toBe(200);
        expectEcho(full(body), created.json, 'subscription');
        expect((await rest('GET', path)).json).toEqual(created.json);
        await rest('DELETE', path);
      }),
      { numRuns: 120 },
    );
  });

  it('an invalid field anywhere is a 400 naming it, and nothing is stored', async () => {
    const invalid: [string, unknown, RegExp][] = [
      ['ackDeadlineSeconds', 601, /^ackDeadlineSeconds: /],
      ['ackDeadlineSeconds', 'ten', /^ackDeadlineSeconds: /],
      ['messageRetentionDuration', '599s', /^messageRetentionDuration: /],
      ['messageRetentionDuration', 600, /^messageRetentionDuration: /],
      ['retainAckedMessages', 'yes', /^retainAckedMessages: /],
      [
        'deadLetterPolicy',
        { deadLetterTopic: `projects/${PROJECT}/topics/echo-dead`, maxDeliveryAttempts: 4 },
        /^deadLetterPolicy\.maxDeliveryAttempts: /,
      ],
      ['retryPolicy', { minimumBackoff: '60s', maximumBackoff: '10s' }, /^retryPolicy\.maximumBackoff: /],
      ['pushConfig', { pushEndpoint: 'ftp://x' }, /^pushConfig\.pushEndpoint: /],
      [
        'pushConfig',
        { pushEndpoint: 'http://127.0.0.1:9/', oidcToken: { serviceAccountEmail: 'nobody' } },
        /^pushConfig\.oidcToken\.serviceAccountEmail: /,
      ],
      ['filter', 'attributes.x = 1', /^filter: /],
      ['labels', { a: 1 }, /^labels\.a: /],
      ['colour', 'red', /^colour: unknown field/],
      ['bigtableConfig', { table: 't' }, /^bigtableConfig: is not supported/],
      ['expirationPolicy', { ttl: '3600s' }, /^expirationPolicy\.ttl: /],
    ];
    await fc.assert(
      fc.asyncProperty(subscriptionBody, fc.constantFrom(...invalid), async (body, [field, value, message]) => {
        const path = `${P}/subscriptions/echo-bad${++counter}`;
        // Without an export or push section, so the one invalid field is the only problem.
        const { pushConfig: _p, bigqueryConfig: _b, cloudStorageConfig: _c, ...plain } = body as Record<string, unknown>;
        const answer = await rest('PUT', path, { ...plain, [field]: value });
        expect(answer.status, JSON.stringify(answer.json)).toBe(400);
        expect(answer.json.error.message).toMatch(message);
        expect((await rest('GET', path)).status).toBe(404);
      }),
      { numRuns: 60 },
    );
  });
});
