import * as grpc from '@grpc/grpc-js';
import { Agent, request } from 'node:http';
import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import { beforeAll, describe, expect, it } from 'vitest';
import { servePerFile } from '../helpers/serve-process.js';

const { server, api } = servePerFile();

beforeAll(async () => {
  await rest('PUT', '/v1/projects/bad-input/topics/orders', {});
  await rest('PUT', '/v1/projects/bad-input/subscriptions/orders-sub', { topic: 'projects/bad-input/topics/orders' });
});

async function rest(method: string, path: string, body?: unknown, raw?: string): Promise<{ status: number; json: any }> {
  const res = await fetch(`http://${server.host}${path}`, {
    method,
    headers: { 'content-type': 'application/json' },
    body: raw ?? (body === undefined ? undefined : JSON.stringify(body)),
  });
  return { status: res.status, json: await res.json() };
}

const publish = (body: unknown) => rest('POST', '/v1/projects/bad-input/topics/orders:publish', body);

/** Google's JSON error body with a 400 and INVALID_ARGUMENT, whose message starts with `field`. */
function expectInvalid(r: { status: number; json: any }, field: string, detail?: RegExp): void {
  expect(r.status).toBe(400);
  expect(r.json.error).toMatchObject({ code: 400, status: 'INVALID_ARGUMENT' });
  expect(r.json.error.message.startsWith(`${field}: `), r.json.error.message).toBe(true);
  if (detail) expect(r.json.error.message).toMatch(detail);
}

describe('REST: wrong input gets a typed 4xx naming the field, never a 500 (issue #9.5)', () => {
  it('malformed percent-encoding in the path is a 400', async () => {
    expectInvalid(await rest('GET', '/v1/projects/bad-input/topics/%E0%A4%A'), 'request path', /percent-encoding/);
    expectInvalid(await rest('GET', '/v1/projects/%zz/topics'), 'request path');
    expectInvalid(await rest('POST', '/v1/projects/bad-input/subscriptions/a%:pull', {}), 'request path');
  });

  it('publish bodies of the wrong shape are refused naming the field', async () => {
    expectInvalid(await publish({ messages: 'abc' }), 'messages', /list of messages/);
    expectInvalid(await publish({ messages: [null] }), 'messages[0]', /object/);
    expectInvalid(await publish({ messages: [{ data: 12 }] }), 'messages[0].data', /must be a base64 string/);
    expectInvalid(await publish({ messages: [{ data: 'not base64!' }] }), 'messages[0].data', /must be a base64 string/);
    expectInvalid(await publish({ messages: [{ data: 'QQ', orderingKey: 5 }] }), 'messages[0].orderingKey', /must be a string/);
    expectInvalid(await publish({ messages: [{ data: 'QQ', attributes: 'x' }] }), 'messages[0].attributes', /object of string values/);
    expectInvalid(await publish({ messages: [{ data: 'QQ', attributes: { a: 1 } }] }), 'messages[0].attributes.a', /must be a string/);
    expectInvalid(await publish({ messages: [{ data: 'QQ', colour: 'red' }] }), 'messages[0].colour', /unknown field/);
    expectInvalid(await publish([1, 2]), 'request body', /object/);
    expectInvalid(
      await rest('POST', '/v1/projects/bad-input/topics/orders:publish', undefined, '{"messages": ['),
      'request body',
      /not JSON/,
    );
    // Nothing of the refused requests was stored: the one good publish is the only message.
    const ok = await publish({ messages: [{ data: Buffer.from('fine').toString('base64'), attributes: { a: 'b' } }] });
    expect(ok.status).toBe(200);
    const pulled = await rest('POST', '/v1/projects/bad-input/subscriptions/orders-sub:pull', { returnImmediately: true, maxMessages: 10 });
    expect(pulled.json.receivedMessages.map((m: any) => [Buffer.from(m.message.data, 'base64').toString(), m.message.attributes])).toEqual([
      ['fine', { a: 'b' }],
    ]);
  });

  it('subscription and topic bodies: wrong types, unknown and unsupported fields are refused', async () => {
    const sub = (body: unknown) => rest('PUT', '/v1/projects/bad-input/subscriptions/s-bad', body);
    const topic = 'projects/bad-input/topics/orders';
    expectInvalid(await sub({ topic, ackDeadlineSeconds: 'soon' }), 'ackDeadlineSeconds', /integer/);
    expectInvalid(await sub({ topic, messageRetentionDuration: 600 }), 'messageRetentionDuration', /"600s"/);
    expectInvalid(await sub({ topic, enableMessageOrdering: 'yes' }), 'enableMessageOrdering', /true or false/);
    expectInvalid(await sub({ topic, pushConfig: { pushEndpoint: 'http://127.0.0.1:1/', attributes: ['x'] } }), 'pushConfig.attributes');
    expectInvalid(await sub({ topic, bigtableConfig: { table: 't' } }), 'bigtableConfig', /not supported/);
    const withPassword = await sub({ topic, pushConfig: { pushEndpoint: 'http://user:s3cret@127.0.0.1:1/' } });
    expectInvalid(withPassword, 'pushConfig.pushEndpoint', /user name or password/);
    expect(JSON.stringify(withPassword.json)).not.toContain('s3cret');
    expectInvalid(await sub({ topic, retryPolicy: { minimumBackoff: '1s', later: true } }), 'retryPolicy.later', /unknown field/);
    expectInvalid(await sub({ topic: 7 }), 'topic', /must be a string/);
    // Without a topic the attempts would mean nothing: refused rather than dropped.
    expectInvalid(await sub({ topic, deadLetterPolicy: { maxDeliveryAttempts: 7 } }), 'deadLetterPolicy.deadLetterTopic', /is required/);
    expectInvalid(await sub({ name: 'projects/bad-input/subscriptions/other', topic }), 'name', /must match the name in the URL/);
    expectInvalid(await rest('PUT', '/v1/projects/bad-input/topics/t-bad', { kmsKeyName: 'k' }), 'kmsKeyName', /not supported/);
    expectInvalid(await rest('PUT', '/v1/projects/bad-input/topics/t-bad', { labels: { a: 1 } }), 'labels.a', /must be a string/);
    // Google Cloud's label rules: lowercase keys starting with a letter, at most 63 characters each, at most 64 labels.
    expectInvalid(await rest('PUT', '/v1/projects/bad-input/topics/t-bad', { labels: { Team: 'a' } }), 'labels', /label key "Team"/);
    expectInvalid(await rest('PUT', '/v1/projects/bad-input/topics/t-bad', { labels: { '': 'a' } }), 'labels', /label key ""/);
    expectInvalid(await rest('PUT', '/v1/projects/bad-input/topics/t-bad', { labels: { team: 'B C' } }), 'labels.team', /at most 63/);
    expectInvalid(await sub({ topic, labels: { ['k'.repeat(64)]: 'v' } }), 'labels', /1-63/);
    expectInvalid(
      await sub({ topic, labels: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, ''])) }),
      'labels',
      /at most 64 labels, got 65/,
    );
    expect(
      (await rest('PUT', '/v1/projects/bad-input/topics/t-labels', { labels: { 'équipe_1-a': 'ventes-été', empty: '' } })).status,
    ).toBe(200);
    expectInvalid(
      await sub({ topic, retryPolicy: { minimumBackoff: '-1s' } }),
      'retryPolicy.minimumBackoff',
      /must not be negative, got -1s/,
    );
    expectInvalid(
      await rest('PATCH', '/v1/projects/bad-input/subscriptions/orders-sub', {
        subscription: { ackDeadlineSeconds: 30 },
        updateMask: 'ackDeadline',
      }),
      'updateMask',
      /unknown/,
    );
    expectInvalid(
      await rest('PATCH', '/v1/projects/bad-input/subscriptions/orders-sub', { subscription: { ackDeadlineSeconds: 30 } }),
      'updateMask',
      /is required/,
    );
    expectInvalid(
      await rest('PATCH', '/v1/projects/bad-input/subscriptions/orders-sub', { subscription: { ackDeadlineSeconds: 30 }, updateMask: '' }),
      'updateMask',
      /at least one/,
    );
    const exportPatch = { subscription: { cloudStorageConfig: { bucket: 'NOT A BUCKET' } }, updateMask: 'cloudStorageConfig' };
    expectInvalid(
      await rest('PATCH', '/v1/projects/bad-input/subscriptions/orders-sub', exportPatch),
      'cloudStorageConfig.bucket',
      /must be a bucket name/,
    );
    expect((await rest('GET', '/v1/projects/bad-input/subscriptions/orders-sub')).json.cloudStorageConfig).toBeUndefined();
    expect((await rest('GET', '/v1/projects/bad-input/subscriptions/s-bad')).status).toBe(404);
    // proto3 JSON: int32 as a string and null as "not set" are fine; the answer leaves fields at their defaults out, as Pub/Sub's does.
    const made = await sub({ topic, ackDeadlineSeconds: '30', filter: null, expirationPolicy: {} });
    expect(made.status).toBe(200);
    expect(made.json).toEqual({
      name: 'projects/bad-input/subscriptions/s-bad',
      topic,
      pushConfig: {},
      ackDeadlineSeconds: 30,
      messageRetentionDuration: '604800s',
      expirationPolicy: {},
      state: 'ACTIVE',
    });
  });

  it('pull, acknowledge, modifyAckDeadline and seek bodies are typed too', async () => {
    const s = '/v1/projects/bad-input/subscriptions/orders-sub';
    expectInvalid(await rest('POST', `${s}:acknowledge`, { ackIds: 'abc' }), 'ackIds', /list of strings/);
    expectInvalid(await rest('POST', `${s}:acknowledge`, { ackIds: [1] }), 'ackIds[0]', /must be a string/);
    expectInvalid(await rest('POST', `${s}:modifyAckDeadline`, { ackIds: [], ackDeadlineSeconds: 1.5 }), 'ackDeadlineSeconds', /integer/);
    expectInvalid(
      await rest('POST', `${s}:modifyAckDeadline`, { ackIds: ['a1-1-1'], ackDeadlineSeconds: 601 }),
      'ackDeadlineSeconds',
      /between 0 and 600/,
    );
    expectInvalid(await rest('POST', `${s}:pull`, { maxMessages: 'many' }), 'maxMessages', /integer/);
    expectInvalid(await rest('POST', `${s}:pull`, { maxMessages: -3, returnImmediately: true }), 'maxMessages');
    // Required and positive, as in Pub/Sub: a body without it is refused, not given a default.
    expectInvalid(await rest('POST', `${s}:pull`, { returnImmediately: true }), 'maxMessages', /positive integer, got 0/);
    expectInvalid(await rest('POST', `${s}:acknowledge`, { ackIds: [] }), 'ackIds', /at least one ack id/);
    expectInvalid(await rest('POST', `${s}:modifyAckDeadline`, { ackIds: [], ackDeadlineSeconds: 30 }), 'ackIds', /at least one ack id/);
    expectInvalid(await rest('POST', `${s}:seek`, { time: 'yesterday' }), 'time', /RFC 3339/);
    expectInvalid(await rest('POST', `${s}:seek`, { snapshot: 12 }), 'snapshot', /must be a string/);
    // time and snapshot are a oneof: the second one given is named.
    expectInvalid(
      await rest('POST', `${s}:seek`, { snapshot: 'projects/bad-input/snapshots/x', time: '2024-05-01T12:00:00Z' }),
      'time',
      /only one of time, snapshot may be set/,
    );
    expectInvalid(await rest('POST', `${s}:seek`, {}), 'time', /a seek needs a target/);
  });

  it('a timestamp naming a day or time that does not exist is refused, not read as a later one', async () => {
    // V8's Date.parse rolls 2026-02-30 over to March 2 and 24:00 to the next day: a seek would move elsewhere.
    const s = '/v1/projects/bad-input/subscriptions/seek-dates';
    expect((await rest('PUT', s, { topic: 'projects/bad-input/topics/orders' })).status).toBe(200);
    for (const time of [
      '2026-02-30T00:00:00Z',
      '2025-02-29T12:00:00Z',
      '2026-04-31T00:00:00Z',
      '2026-05-01T24:00:00Z',
      '2026-05-01T12:00:00+24:00',
      '2026-05-01T12:00:00+05:60',
    ]) {
      expectInvalid(await rest('POST', `${s}:seek`, { time }), 'time', /RFC 3339/);
    }
    const snapshot = '/v1/projects/bad-input/snapshots/no-such-day';
    expect((await rest('PUT', snapshot, { subscription: 'seek-dates' })).status).toBe(200);
    const expireTime = '2026-06-31T00:00:00Z';
    expectInvalid(await rest('PATCH', snapshot, { snapshot: { expireTime }, updateMask: 'expireTime' }), 'snapshot.expireTime', /RFC 3339/);
    // Real days still pass: a leap day, an offset, the last second of a day.
    for (const time of ['2024-02-29T12:00:00Z', '2026-05-01T23:59:59.999999999+05:30', '2000-02-29T00:00:00-12:00']) {
      expect((await rest('POST', `${s}:seek`, { time })).status, time).toBe(200);
    }
  });

  it("a JSON object nesting thousands deep in a Struct (a transform's parameters) is a 400 naming it, not a 500", async () => {
    const nested = (depth: number) => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
    const lists = (depth: number) => `${'['.repeat(depth)}1${']'.repeat(depth)}`;
    const subscription = (parameters: string) =>
      rest(
        'PUT',
        '/v1/projects/bad-input/subscriptions/deep-sub',
        undefined,
        `{"topic":"projects/bad-input/topics/orders","messageTransforms":[{"aiInference":{"endpoint":"e","unstructuredInference":{"parameters":${parameters}}}}]}`,
      );
    const field = 'messageTransforms[0].aiInference.unstructuredInference.parameters';
    expectInvalid(await subscription(nested(20_000)), field, /deeper than 100 levels/);
    expectInvalid(await subscription(`{"a":${lists(20_000)}}`), field, /deeper than 100 levels/);
    // 100 messages deep at most, as protobuf decodes them: the innermost Value of 48 objects is the 100th
    expectInvalid(await subscription(nested(49)), field, /deeper than 100 levels/);
    expectInvalid(await subscription(nested(48)), 'messageTransforms', /not supported/);
  });

  it("unknown paths and wrong methods get Google's JSON error body with a 404", async () => {
    const unknown = await rest('GET', '/v2/anything');
    expect(unknown).toEqual({ status: 404, json: { error: { code: 404, status: 'NOT_FOUND', message: 'no such path: /v2/anything' } } });
    const wrongMethod = await rest('POST', '/v1/projects/bad-input/topics/orders', {});
    expect(wrongMethod.status).toBe(404);
    expect(wrongMethod.json.error).toMatchObject({
      status: 'NOT_FOUND',
      message: expect.stringContaining('allowed: DELETE, GET, PATCH, PUT'),
    });
  });

  it('a body over 14 MiB is refused with 413 before it is sent', async () => {
    const [hostname, port] = server.host.split(':');
    const { status, body } = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request(
        {
          hostname,
          port,
          method: 'POST',
          path: '/v1/projects/bad-input/topics/orders:publish',
          headers: { 'content-length': 15 * 1024 * 1024 },
        },
        (res) => {
          let text = '';
          res.on('data', (c) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode!, body: text }));
        },
      );
      req.on('error', reject);
      // Only the headers and a first piece go out: the answer must not wait for the rest.
      req.write(Buffer.alloc(1024, 0x20));
    });
    expect(status).toBe(413);
    expect(JSON.parse(body).error).toMatchObject({ code: 413, status: 'INVALID_ARGUMENT' });
  });

  it("a body over 14 MiB sent whole, as fetch and Google's REST client send one, gets its 413, not a reset connection (EPIPE)", async () => {
    // a publish of 30 MB in one request: over the REST body limit, in base64 as in any JSON body
    const body = JSON.stringify({ messages: [{ data: Buffer.alloc(30_000_000, 7).toString('base64') }] });
    const res = await fetch(`http://${server.host}/v1/projects/bad-input/topics/orders:publish`, { method: 'POST', body });
    expect(res.status).toBe(413);
    expect((await res.json()).error).toMatchObject({ code: 413, status: 'INVALID_ARGUMENT' });
  });

  // Chunked, it had its 413 written and the connection closed under the client still sending: a reset
  // (ECONNRESET, EPIPE), which can come before the client has read the answer. Now the rest is read and dropped, up
  // to 4 times the limit, as for a stated length: the client reads its 413 and goes on with the connection.
  it('a body that grows over 14 MiB without a length gets a clean 413 with the JSON error, and the connection goes on', async () => {
    const [hostname, port] = server.host.split(':');
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const send = (body: Buffer[]) =>
      new Promise<{ status: number; json: any; socket: unknown }>((resolve, reject) => {
        const req = request({ hostname, port, agent, method: 'POST', path: '/v1/projects/bad-input/topics/orders:publish' }, (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode!, json: JSON.parse(text), socket: req.socket }));
          res.on('error', reject);
        });
        req.on('error', reject);
        for (const chunk of body) req.write(chunk);
        req.end();
      });
    try {
      const chunk = Buffer.alloc(1024 * 1024, 0x20);
      const refused = await send(Array.from({ length: 20 }, () => chunk));
      expect(refused.status).toBe(413);
      expect(refused.json.error).toMatchObject({ code: 413, status: 'INVALID_ARGUMENT', message: 'request body over 14680064 bytes' });
      const data = Buffer.from('after 413').toString('base64');
      const next = await send([Buffer.from(JSON.stringify({ messages: [{ data }] }))]);
      expect(next.status).toBe(200);
      expect(next.json.messageIds).toHaveLength(1);
      expect(next.socket === refused.socket, 'the second request went over the same connection').toBe(true);
    } finally {
      agent.destroy();
    }
  });

  it('a body without a length is read and dropped up to 4 times the limit, then its connection ends', async () => {
    const [host, port] = server.host.split(':');
    const mib = 1024 * 1024;
    // A raw connection, so what counts as sent is what the server took (Node's client waits for a 'drain'
    // that never comes once its answer is in).
    const { answer, sent } = await new Promise<{ answer: string; sent: number }>((resolve) => {
      const socket = connect(Number(port), host);
      let answer = '';
      let sent = 0;
      socket.setEncoding('latin1');
      socket.on('data', (text: string) => (answer += text));
      socket.on('error', () => undefined);
      socket.on('close', () => resolve({ answer, sent }));
      socket.write(
        `POST /v1/projects/bad-input/topics/orders:publish HTTP/1.1\r\nhost: ${server.host}\r\ntransfer-encoding: chunked\r\n\r\n`,
      );
      const chunk = Buffer.concat([Buffer.from(`${mib.toString(16)}\r\n`), Buffer.alloc(mib, 0x20), Buffer.from('\r\n')]);
      const pump = () => {
        while (sent < 100 * mib) {
          sent += mib;
          if (!socket.write(chunk)) return void socket.once('drain', pump);
        }
        socket.end('0\r\n\r\n');
      };
      pump();
    });
    expect(answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(answer).toContain('"message":"request body over 14680064 bytes"');
    // Read whole, 100 MiB would have gone out; the server ended the connection once it had read 56 MiB.
    expect(sent).toBeLessThan(100 * mib);
    expect(sent).toBeGreaterThanOrEqual(56 * mib);
  });

  it('a gzip body (content-encoding: gzip) is inflated, as Google takes it; bad gzip, a bomb and other codings are refused', async () => {
    const send = async (body: Buffer | string, encoding: string) => {
      const res = await fetch(`http://${server.host}/v1/projects/bad-input/topics/orders:publish`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-encoding': encoding },
        body: typeof body === 'string' ? body : new Uint8Array(body),
      });
      return { status: res.status, json: await res.json() };
    };
    const message = JSON.stringify({ messages: [{ data: Buffer.from('zipped').toString('base64'), attributes: { via: 'gzip' } }] });
    const sent = await send(gzipSync(message), 'gzip');
    expect(sent.status).toBe(200);
    expect(sent.json.messageIds).toHaveLength(1);
    expect((await send(gzipSync(message), 'identity, x-gzip')).status).toBe(200);
    expectInvalid(await send(message, 'gzip'), 'request body', /not valid gzip/);
    // Small on the wire, over 14 MiB inflated.
    const bomb = await send(gzipSync(Buffer.alloc(15 * 1024 * 1024, 0x20)), 'gzip');
    expect(bomb.status).toBe(413);
    expect(bomb.json.error).toMatchObject({ code: 413, status: 'INVALID_ARGUMENT' });
    // A coding that is not served is refused, not read as plain JSON.
    const brotli = await send(message, 'br');
    expect(brotli.status).toBe(415);
    expect(brotli.json.error).toMatchObject({ code: 415, status: 'INVALID_ARGUMENT', message: expect.stringContaining('"br"') });
    const pulled = await rest('POST', '/v1/projects/bad-input/subscriptions/orders-sub:pull', { maxMessages: 10 });
    const zipped = pulled.json.receivedMessages.filter((m: any) => m.message.attributes?.via === 'gzip');
    expect(zipped.map((m: any) => Buffer.from(m.message.data, 'base64').toString())).toEqual(['zipped', 'zipped']);
  });
});

describe('gRPC: undecodable requests are INVALID_ARGUMENT, not INTERNAL (issue #9.5)', () => {
  const rawCall = (client: grpc.Client, path: string, bytes: Buffer) =>
    new Promise<grpc.ServiceError>((resolve, reject) =>
      client.makeUnaryRequest(
        path,
        (b: Buffer) => b,
        (b: Buffer) => b,
        bytes,
        (e) => (e ? resolve(e) : reject(new Error('garbage was accepted'))),
      ),
    );

  it('garbage bytes on Publish, CreateSubscription and StreamingPull', async () => {
    // 0x0f: a field number 1 with wire type 7, which does not exist; the rest is truncated varints.
    const garbage = Buffer.from([0x0f, 0xff, 0xff, 0xff, 0xff, 0xff]);
    const publish = await rawCall(api.publisher, '/google.pubsub.v1.Publisher/Publish', garbage);
    expect([publish.code, publish.details]).toEqual([
      grpc.status.INVALID_ARGUMENT,
      expect.stringContaining('not a valid protobuf message'),
    ]);
    expect((await rawCall(api.subscriber, '/google.pubsub.v1.Subscriber/CreateSubscription', garbage)).code).toBe(
      grpc.status.INVALID_ARGUMENT,
    );
    const stream = api.subscriber.makeBidiStreamRequest(
      '/google.pubsub.v1.Subscriber/StreamingPull',
      (b: Buffer) => b,
      (b: Buffer) => b,
    );
    const ended = new Promise<grpc.ServiceError>((resolve) => stream.on('error', resolve));
    stream.write(garbage);
    expect((await ended).code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(server.alive()).toBe(true);
  });

  // protobufjs reads a field by its declared type whatever its wire type says: StreamingPull's int32 field 5
  // sent as 10 bytes opened the stream with a 10-second deadline. Google's servers refuse such a request.
  it('a known field sent with another wire type than its own is refused, naming it; an unknown field is skipped', async () => {
    await rest('PUT', '/v1/projects/bad-input/topics/wire', {});
    await rest('PUT', '/v1/projects/bad-input/subscriptions/wire-sub', { topic: 'projects/bad-input/topics/wire' });
    const field = (n: number, b: Buffer) => Buffer.concat([Buffer.from([(n << 3) | 2, b.length]), b]);
    const subscription = field(1, Buffer.from('projects/bad-input/subscriptions/wire-sub'));
    const stream = api.subscriber.makeBidiStreamRequest(
      '/google.pubsub.v1.Subscriber/StreamingPull',
      (b: Buffer) => b,
      (b: Buffer) => b,
    );
    const ended = new Promise<grpc.ServiceError>((resolve) => stream.on('error', resolve));
    stream.write(Buffer.concat([subscription, field(5, Buffer.alloc(10))]));
    expect(await ended).toMatchObject({
      code: grpc.status.INVALID_ARGUMENT,
      details: expect.stringContaining('google.pubsub.v1.StreamingPullRequest.streamAckDeadlineSeconds (field 5) came as length-delimited'),
    });
    // Nested: a PubsubMessage's ordering_key (a string, field 5) as a varint.
    const message = Buffer.concat([field(1, Buffer.from('x')), Buffer.from([(5 << 3) | 0, 7])]);
    const publish = await rawCall(
      api.publisher,
      '/google.pubsub.v1.Publisher/Publish',
      Buffer.concat([field(1, Buffer.from('projects/bad-input/topics/wire')), field(2, message)]),
    );
    expect([publish.code, publish.details]).toEqual([
      grpc.status.INVALID_ARGUMENT,
      expect.stringContaining('google.pubsub.v1.PubsubMessage.orderingKey (field 5) came as varint'),
    ]);
    // A field this proto does not know (99, as a varint and as 32 bits) is skipped: the request reaches the
    // handler, which refuses the ack id it never issued.
    const acked = await new Promise<grpc.ServiceError | null>((resolve) =>
      api.subscriber.makeUnaryRequest(
        '/google.pubsub.v1.Subscriber/Acknowledge',
        (b: Buffer) => b,
        (b: Buffer) => b,
        Buffer.concat([
          subscription,
          field(2, Buffer.from('unknown-ack-id')),
          Buffer.from([0x98, 0x06, 0x01]),
          Buffer.from([0x9d, 0x06, 1, 2, 3, 4]),
        ]),
        (e) => resolve(e),
      ),
    );
    expect([acked?.code, acked?.details]).toEqual([
      grpc.status.INVALID_ARGUMENT,
      expect.stringContaining('is not an ack id this server issued'),
    ]);
    expect(server.alive()).toBe(true);
  });

  it('a string field that is not UTF-8 is refused, not stored with U+FFFD in its place; U+FFFD itself goes through', async () => {
    await rest('PUT', '/v1/projects/bad-input/topics/utf8', {});
    await rest('PUT', '/v1/projects/bad-input/subscriptions/utf8-sub', { topic: 'projects/bad-input/topics/utf8' });
    // PublishRequest { topic, messages: [{ data: 'x', attributes: { colour: value } }] }, by hand: a client
    // library would not encode a string that is not UTF-8.
    const field = (n: number, b: Buffer) => Buffer.concat([Buffer.from([(n << 3) | 2, b.length]), b]);
    const publishRequest = (value: Buffer) =>
      Buffer.concat([
        field(1, Buffer.from('projects/bad-input/topics/utf8')),
        field(2, Buffer.concat([field(1, Buffer.from('x')), field(2, Buffer.concat([field(1, Buffer.from('colour')), field(2, value)]))])),
      ]);
    const refused = await rawCall(api.publisher, '/google.pubsub.v1.Publisher/Publish', publishRequest(Buffer.from([0x72, 0xff, 0xfe])));
    expect([refused.code, refused.details]).toEqual([grpc.status.INVALID_ARGUMENT, expect.stringContaining('not valid UTF-8')]);

    const restBody = Buffer.concat([
      Buffer.from('{"messages":[{"data":"eA==","attributes":{"colour":"r'),
      Buffer.from([0xff]),
      Buffer.from('"}}]}'),
    ]);
    const res = await fetch(`http://${server.host}/v1/projects/bad-input/topics/utf8:publish`, { method: 'POST', body: restBody });
    expectInvalid({ status: res.status, json: await res.json() }, 'request body', /not valid UTF-8/);
    // Valid UTF-8 JSON can still escape half a surrogate pair alone, in a value or in a key.
    const utf8Publish = (raw: string) => rest('POST', '/v1/projects/bad-input/topics/utf8:publish', undefined, raw);
    expectInvalid(
      await utf8Publish('{"messages":[{"data":"eA==","attributes":{"colour":"r\\ud800"}}]}'),
      'messages[0].attributes.colour',
      /lone surrogate/,
    );
    expectInvalid(
      await utf8Publish('{"messages":[{"data":"eA==","orderingKey":"\\udc00k"}]}'),
      'messages[0].orderingKey',
      /lone surrogate/,
    );
    expectInvalid(await utf8Publish('{"messages":[{"data":"eA==","attributes":{"\\ud800":"v"}}]}'), 'messages[0].attributes.\ud800 (key)');
    // A whole pair, escaped, is a character like any other.
    expect((await utf8Publish('{"messages":[{"data":"eA==","attributes":{"face":"\\ud83d\\ude00"}}]}')).status).toBe(200);

    const kept = await api.pub('publish', {
      topic: 'projects/bad-input/topics/utf8',
      messages: [{ data: Buffer.from('x'), attributes: { colour: 'r\uFFFD' } }],
    });
    expect(kept.messageIds).toHaveLength(1);
    const pulled = await api.sub('pull', { subscription: 'projects/bad-input/subscriptions/utf8-sub', maxMessages: 10 });
    expect(pulled.receivedMessages.map((m: any) => m.message.attributes)).toEqual([{ face: '\u{1F600}' }, { colour: 'r\uFFFD' }]);
  });

  it('a Duration the type does not allow is refused, not read as another length', async () => {
    const create = (messageRetentionDuration: { seconds: number; nanos: number }) =>
      api.sub('createSubscription', {
        name: 'projects/bad-input/subscriptions/durations',
        topic: 'projects/bad-input/topics/orders',
        messageRetentionDuration,
      });
    await expect(create({ seconds: 600, nanos: 2_000_000_000 })).rejects.toMatchObject({
      code: grpc.status.INVALID_ARGUMENT,
      details: 'messageRetentionDuration.nanos: must be an integer between -999999999 and 999999999, got 2000000000',
    });
    await expect(create({ seconds: 700, nanos: -500_000_000 })).rejects.toMatchObject({
      code: grpc.status.INVALID_ARGUMENT,
      details: 'messageRetentionDuration.nanos: must have the sign of seconds (700), got -500000000',
    });
    // A valid one with a fraction keeps it.
    const created = await create({ seconds: 700, nanos: 500_000_000 });
    expect(created.messageRetentionDuration).toEqual({ seconds: '700', nanos: 500_000_000 });
  });

  it('a request over 20 MiB is INVALID_ARGUMENT naming the limit, as Pub/Sub answers it, not a RESOURCE_EXHAUSTED clients retry', async () => {
    // Before: grpc-js's own RESOURCE_EXHAUSTED, which Google's Node client retries on Publish for 60 s
    // before failing with DEADLINE_EXCEEDED.
    const big = { topic: 'projects/bad-input/topics/orders', messages: [{ data: Buffer.alloc(21 * 1024 * 1024, 1) }] };
    const refused = api.pub('publish', big);
    await expect(refused).rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT });
    const details = ((await refused.catch((e: unknown) => e)) as grpc.ServiceError).details;
    expect(details).toContain('request payload size exceeds the limit');
    expect(details).toContain(String(20 * 1024 * 1024));
    expect(server.alive()).toBe(true);
    // The call after it on the same connection is served as usual.
    await expect(
      api.pub('publish', { topic: 'projects/bad-input/topics/orders', messages: [{ data: Buffer.from('after') }] }),
    ).resolves.toMatchObject({
      messageIds: [expect.any(String)],
    });
  });

  it('an error quoting a huge value is cut to fit its trailers: INVALID_ARGUMENT at once, not a hang until the deadline', async () => {
    // Before: the message quoted the whole 200 KB ack id (or name); grpc-js dropped trailers that large and
    // the call ended only at its deadline, DEADLINE_EXCEEDED.
    const refused = (client: grpc.Client & Record<string, any>, method: string, request: unknown) =>
      new Promise<grpc.ServiceError | null>((resolve) =>
        client[method](request, new grpc.Metadata(), { deadline: Date.now() + 5_000 }, (e: grpc.ServiceError | null) => resolve(e)),
      );
    const huge = 'x'.repeat(200_000);
    const ack = await refused(api.subscriber, 'acknowledge', {
      subscription: 'projects/bad-input/subscriptions/orders-sub',
      ackIds: [huge],
    });
    expect(ack).toMatchObject({ code: grpc.status.INVALID_ARGUMENT });
    expect(ack!.details.startsWith('ackIds[0]: ')).toBe(true);
    expect(ack!.details.length).toBeLessThanOrEqual(2048);
    expect(ack!.details).toContain('characters in all');
    const topic = await refused(api.publisher, 'getTopic', { topic: `projects/bad-input/topics/${huge}` });
    expect(topic).toMatchObject({ code: grpc.status.INVALID_ARGUMENT });
    expect(topic!.details.startsWith('topic: invalid id')).toBe(true);
  });

  it('a project of megabytes, with control characters or of dots is refused, not stored', async () => {
    // Before: both were created, and the 1 MB project's name came back in every answer naming the topic.
    const long = `projects/${'p'.repeat(1_000_000)}/topics/long-project`;
    await expect(api.pub('createTopic', { name: long })).rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT });
    await expect(api.pub('listTopics', { project: `projects/${'p'.repeat(300)}` })).rejects.toMatchObject({
      code: grpc.status.INVALID_ARGUMENT,
    });
    expectInvalid(await rest('PUT', '/v1/projects/bad%0Ainput/topics/newline-project', {}), 'name', /invalid project/);
    expectInvalid(await rest('PUT', '/v1/projects/bad-input/topics/dotted', { name: 'projects/a b/topics/dotted' }), 'name');
    // A project of dots was created over gRPC, and over REST its names could not be reached (URLs drop dot segments).
    for (const dots of ['.', '..'])
      await expect(api.pub('createTopic', { name: `projects/${dots}/topics/dot-project` })).rejects.toMatchObject({
        code: grpc.status.INVALID_ARGUMENT,
        details: expect.stringMatching(/^name: invalid project/),
      });
    // Projects as Google Cloud spells them still pass.
    expect((await rest('PUT', '/v1/projects/example.com%3Abad-input/topics/domain-project', {})).status).toBe(200);
  });

  it('requests without their required messages are INVALID_ARGUMENT', async () => {
    await expect(api.pub('updateTopic', {})).rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT, details: 'topic: is required' });
    await expect(api.sub('updateSubscription', {})).rejects.toMatchObject({
      code: grpc.status.INVALID_ARGUMENT,
      details: 'subscription: is required',
    });
    await expect(api.sub('modifyPushConfig', { subscription: 'projects/bad-input/subscriptions/orders-sub' })).rejects.toMatchObject({
      code: grpc.status.INVALID_ARGUMENT,
    });
    await expect(api.sub('seek', { subscription: 'projects/bad-input/subscriptions/orders-sub' })).rejects.toMatchObject({
      code: grpc.status.INVALID_ARGUMENT,
    });
    await expect(api.pub('createTopic', { name: 'projects/bad-input/topics/kms', kmsKeyName: 'k' })).rejects.toMatchObject({
      code: grpc.status.INVALID_ARGUMENT,
      details: 'kmsKeyName: is not supported by Orderly',
    });
  });
});
