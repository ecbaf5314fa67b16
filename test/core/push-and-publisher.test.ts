import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { OrderingKeyPausedError } from '../../src/core/errors.js';
import { Publisher } from '../../src/core/publisher.js';
import { pushRequest } from '../../src/core/push-delivery.js';
import { retryDelayMs } from '../../src/core/retry-backoff.js';
import type { ManualClock } from '../../src/core/clock.js';
import type { PubSubCore } from '../../src/core/pubsub-core.js';
import { openCore, settle } from '../helpers/core.js';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait-for.js';

let dir: ReturnType<typeof tempDir>;
let core: PubSubCore;
let clock: ManualClock;

beforeEach(async () => {
  dir = tempDir();
  ({ core, clock } = await openCore(dir.path));
  await core.createTopic('events');
});
afterEach(async () => {
  await core.close();
  dir.remove();
});
/** Waits until every message of `pushed` is acked, moving the manual clock past each failed push's backoff. */
const drained = () =>
  waitFor('the backlog of pushed acked', () => {
    clock.advance(100);
    return core.metrics('pushed').backlogMessages === 0;
  });

describe('push delivery', () => {
  let server: Server;
  afterEach(() => new Promise<void>((r) => server.close(() => r())));

  /** Listens with `endpoint` and creates `pushed`, pushing to it with a 600 s ack deadline. */
  async function pushWithLongDeadline(endpoint: Server): Promise<void> {
    await new Promise<void>((r) => endpoint.listen(0, '127.0.0.1', r));
    await core.createSubscription('pushed', {
      topic: 'events',
      ackDeadlineSeconds: 600,
      pushConfig: { pushEndpoint: `http://127.0.0.1:${(endpoint.address() as AddressInfo).port}/push` },
    });
  }

  it('POSTs the Pub/Sub envelope, one outstanding message per key, 2xx acks and errors redeliver', async () => {
    const received: { key: string; data: string; attempt?: number; attributes?: Record<string, string>; userAgent?: string }[] = [];
    let inFlightPerKey = new Map<string, number>();
    let overlap = false;
    let failedOnce = false;
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        const env = JSON.parse(body);
        const key = env.message.orderingKey ?? '';
        const n = (inFlightPerKey.get(key) ?? 0) + 1;
        if (n > 1) overlap = true;
        inFlightPerKey.set(key, n);
        const data = Buffer.from(env.message.data, 'base64').toString();
        received.push({
          key,
          data,
          attempt: env.deliveryAttempt,
          attributes: env.message.attributes,
          userAgent: req.headers['user-agent'],
        });
        expect(env.subscription).toBe('projects/p/subscriptions/pushed');
        expect(env.message.messageId).toBe(env.message.message_id);
        setTimeout(() => {
          inFlightPerKey.set(key, inFlightPerKey.get(key)! - 1);
          const fail = data === 'a2' && !failedOnce;
          failedOnce ||= fail;
          res.writeHead(fail ? 503 : 204).end();
        }, 5);
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as AddressInfo).port;
    await core.createSubscription('pushed', {
      topic: 'events',
      enableMessageOrdering: true,
      pushConfig: { pushEndpoint: `http://127.0.0.1:${port}/push` },
      retryPolicy: { minimumBackoff: 0, maximumBackoff: 0 },
    });
    await core.publish(
      'events',
      ['a1', 'a2', 'a3'].map((data) => ({ data, orderingKey: 'a' })),
    );
    await core.publish(
      'events',
      ['b1', 'b2'].map((data) => ({ data, orderingKey: 'b', ...(data === 'b2' ? { attributes: { tier: 'gold' } } : {}) })),
    );
    await drained();
    expect(overlap).toBe(false);
    expect(received.filter((r) => r.key === 'a').map((r) => r.data)).toEqual(['a1', 'a2', 'a2', 'a3']);
    // As Pub/Sub's pushes: no `attributes` member for a message without any, and Pub/Sub's User-Agent.
    expect(received.filter((r) => r.key === 'b').map((r) => [r.data, r.attributes])).toEqual([
      ['b1', undefined],
      ['b2', { tier: 'gold' }],
    ]);
    expect(new Set(received.map((r) => r.userAgent))).toEqual(new Set(['CloudPubSub-Google']));
    // The endpoint's answer is what status shows (lastNackReason), not only a count.
    const { counters, lastNackReason } = core.metrics('pushed');
    expect(counters.nacked).toBe(1);
    expect(lastNackReason?.message).toBe('push endpoint answered HTTP 503');
    inFlightPerKey = new Map();
  });

  /** Listens with `server`, which keeps every request's body and headers in `got` and answers 204; resolves with its URL. */
  async function recordingEndpoint(got: { body: Buffer; headers: Record<string, string | string[] | undefined> }[]): Promise<string> {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        got.push({ body: Buffer.concat(chunks), headers: req.headers });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}/push`;
  }

  it('payload unwrapping (noWrapper): the raw data as the body, metadata and attributes as headers with writeMetadata', async () => {
    const got: { body: Buffer; headers: Record<string, string | string[] | undefined> }[] = [];
    const endpoint = await recordingEndpoint(got);
    await core.createSubscription('raw', { topic: 'events', pushConfig: { pushEndpoint: endpoint, noWrapper: { writeMetadata: false } } });
    await core.createSubscription('raw-meta', {
      topic: 'events',
      enableMessageOrdering: true,
      pushConfig: {
        pushEndpoint: endpoint,
        attributes: { 'x-team': 'blue' },
        noWrapper: { writeMetadata: true },
        oidcToken: { serviceAccountEmail: 'push@p.iam.gserviceaccount.com', audience: 'me' },
      },
    });
    const data = Buffer.from([0, 1, 2, 250, 255]);
    const [id] = await core.publish('events', [
      { data, orderingKey: 'k', attributes: { 'Content-Type': 'application/x-thing', color: 'red' } },
    ]);
    await waitFor('both pushes', () => got.length === 2);
    const plain = got.find((g) => g.headers['x-goog-pubsub-message-id'] === undefined)!;
    const meta = got.find((g) => g.headers['x-goog-pubsub-message-id'] !== undefined)!;
    expect(plain.body.equals(data)).toBe(true);
    expect(plain.headers['content-type']).toBe('application/octet-stream');
    expect(plain.headers.color).toBeUndefined();
    expect(plain.headers['user-agent']).toBe('CloudPubSub-Google');
    expect(meta.body.equals(data)).toBe(true);
    expect(meta.headers).toMatchObject({
      'x-goog-pubsub-subscription-name': 'projects/p/subscriptions/raw-meta',
      'x-goog-pubsub-message-id': id,
      'x-goog-pubsub-ordering-key': 'k',
      'x-goog-pubsub-publish-time': expect.stringMatching(/^\d{4}-\d{2}-\d{2}T/),
      'content-type': 'application/x-thing',
      color: 'red',
      'x-team': 'blue',
      'user-agent': 'CloudPubSub-Google',
    });
    // No token is minted: the OIDC settings are stored and returned only (docs/api-coverage.md).
    expect(meta.headers.authorization).toBeUndefined();
    expect(core.getSubscription('raw-meta').pushConfig).toMatchObject({
      oidcToken: { serviceAccountEmail: 'push@p.iam.gserviceaccount.com', audience: 'me' },
      noWrapper: { writeMetadata: true },
    });
    await settle(core);
    expect(core.metrics('raw-meta').backlogMessages).toBe(0);
    // An attribute that cannot be a header fails the delivery naming it (it is retried, then dead-lettered).
    const message = {
      ackId: 'a',
      deliveryAttempt: 0,
      message: { messageId: '1', publishTime: new Date(), data, attributes: { 'bad key': 'x' }, orderingKey: '', sequence: 1 },
    };
    expect(() => pushRequest('s', message, { pushEndpoint: endpoint, attributes: {}, noWrapper: { writeMetadata: true } })).toThrow(
      'message attribute "bad key" cannot be sent as an HTTP header (payload unwrapping writes attributes as headers): it is not a valid HTTP header name',
    );
  });

  it('the envelope is proto3 JSON: a message without data or attributes has no such member, as Pub/Sub pushes it', async () => {
    const got: { body: Buffer; headers: Record<string, string | string[] | undefined> }[] = [];
    const endpoint = await recordingEndpoint(got);
    await core.createSubscription('wrapped', { topic: 'events', enableMessageOrdering: true, pushConfig: { pushEndpoint: endpoint } });
    const ids = await core.publish('events', [
      { data: '', orderingKey: 'k', attributes: { only: 'attributes' } },
      { data: 'x', orderingKey: 'k' },
    ]);
    await waitFor('both pushes', () => got.length === 2);
    const messages = got.map((g) => (JSON.parse(g.body.toString()) as { message: Record<string, unknown> }).message);
    const time = { publishTime: expect.any(String), publish_time: expect.any(String) };
    expect(messages).toEqual([
      { attributes: { only: 'attributes' }, messageId: ids[0], message_id: ids[0], orderingKey: 'k', ...time },
      { data: 'eA==', messageId: ids[1], message_id: ids[1], orderingKey: 'k', ...time },
    ]);
  });

  it("with writeMetadata a message's attribute replaces a pushConfig attribute of the same header name, whatever the case of either", async () => {
    const got: { body: Buffer; headers: Record<string, string | string[] | undefined> }[] = [];
    const endpoint = await recordingEndpoint(got);
    await core.createSubscription('raw-meta', {
      topic: 'events',
      enableMessageOrdering: true,
      pushConfig: {
        pushEndpoint: endpoint,
        attributes: { 'User-Agent': 'from-config', 'x-team': 'blue' },
        noWrapper: { writeMetadata: true },
      },
    });
    await core.publish('events', [
      { data: 'one', orderingKey: 'k', attributes: { 'user-agent': 'from-message', 'X-Team': 'red' } },
      { data: 'two', orderingKey: 'k' },
    ]);
    await waitFor('both pushes', () => got.length === 2);
    expect(got.map((g) => [g.body.toString(), g.headers['user-agent'], g.headers['x-team']])).toEqual([
      ['one', 'from-message', 'red'],
      ['two', 'from-config', 'blue'],
    ]);
  });

  it('payload unwrapping with writeMetadata sends an ordering key and attributes beyond Latin-1 as their UTF-8 bytes, in key order', async () => {
    const got: { body: string; key: string; city: string }[] = [];
    /** Node reads a header's bytes as Latin-1: back to the bytes, then as the UTF-8 they are. */
    const utf8 = (header: string | string[] | undefined) => Buffer.from(String(header), 'latin1').toString('utf8');
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        got.push({
          body: Buffer.concat(chunks).toString(),
          key: utf8(req.headers['x-goog-pubsub-ordering-key']),
          city: utf8(req.headers.city),
        });
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}/push`;
    await core.createSubscription('raw-meta', {
      topic: 'events',
      enableMessageOrdering: true,
      pushConfig: { pushEndpoint: endpoint, noWrapper: { writeMetadata: true } },
    });
    // Before, Node refused such a header: the key's first message failed at every attempt and held the rest.
    await core.publish('events', [
      { data: 'one', orderingKey: 'ключ', attributes: { city: 'Zürich 東京' } },
      { data: 'two', orderingKey: 'ключ', attributes: { city: 'Zürich' } },
    ]);
    await waitFor('both pushes', () => got.length === 2);
    expect(got).toEqual([
      { body: 'one', key: 'ключ', city: 'Zürich 東京' },
      { body: 'two', key: 'ключ', city: 'Zürich' },
    ]);
    // A control character cannot be in a header: the delivery fails naming the key (rather than "unreachable").
    const message = {
      ackId: 'a',
      deliveryAttempt: 0,
      message: { messageId: '1', publishTime: new Date(), data: Buffer.from('x'), attributes: {}, orderingKey: 'a\nb', sequence: 1 },
    };
    expect(() => pushRequest('s', message, { pushEndpoint: endpoint, attributes: {}, noWrapper: { writeMetadata: true } })).toThrow(
      "the message's ordering key cannot be sent as the x-goog-pubsub-ordering-key header (payload unwrapping writes it there): it must not contain control characters",
    );
  });

  it("a seek while a key's request is out sends the key again only once that request ends; a 206 is not a success", async () => {
    const received: string[] = [];
    let out = 0;
    let mostOut = 0;
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        const data = Buffer.from(JSON.parse(body).message.data, 'base64').toString();
        received.push(data);
        mostOut = Math.max(mostOut, ++out);
        setTimeout(() => {
          out--;
          res.writeHead(data === 'partial' && received.filter((d) => d === 'partial').length === 1 ? 206 : 200).end();
        }, 150);
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    await core.createSubscription('pushed', {
      topic: 'events',
      enableMessageOrdering: true,
      retainAckedMessages: true,
      pushConfig: { pushEndpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}/push` },
      retryPolicy: { minimumBackoff: 0, maximumBackoff: 0 },
    });
    const before = clock.now();
    clock.advance(1000);
    await core.publish(
      'events',
      ['s1', 's2', 's3'].map((data) => ({ data, orderingKey: 'k' })),
    );
    await waitFor('s1 and s2 pushed', () => received.length === 2);
    await core.seek('pushed', before);
    await waitFor('the replay pushed and answered', () => core.metrics('pushed').backlogMessages === 0 && out === 0);
    expect(received).toEqual(['s1', 's2', 's1', 's2', 's3']);
    expect(mostOut).toBe(1);

    await core.publish('events', [{ data: 'partial', orderingKey: 'p' }]);
    await drained();
    expect(received.filter((d) => d === 'partial')).toHaveLength(2);
    expect(core.metrics('pushed').lastNackReason?.message).toBe(
      'push endpoint answered HTTP 206, not a success for push (102, 200, 201, 202, 204)',
    );
  });

  it('an interim 102 (Processing) acks the message, as Pub/Sub counts it, whatever the endpoint answers after', async () => {
    let held: ServerResponse | undefined;
    let requests = 0;
    server = createServer((req, res) => {
      requests++;
      req.resume();
      req.on('end', () => {
        res.writeProcessing();
        held = res;
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    await core.createSubscription('pushed', {
      topic: 'events',
      pushConfig: { pushEndpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}/push` },
    });
    await core.publish('events', [{ data: 'slow work' }]);
    // Without the 102 counting, the message stays out until the request's timeout, the 10 s ack deadline.
    await waitFor('the push acked on its 102', () => core.metrics('pushed').backlogMessages === 0, 8_000);
    held!.writeHead(500).end();
    expect(requests).toBe(1);
    expect(core.metrics('pushed').counters.nacked).toBe(0);
  });

  it('an endpoint refusing a push as unauthenticated (401, 403) of a subscription with an oidcToken: the nack says no token was sent', async () => {
    // An endpoint that verifies tokens, as one behind Google's push auth does.
    server = createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(req.headers.authorization ? 204 : req.url === '/forbid' ? 403 : 401).end());
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const oidcToken = { serviceAccountEmail: 'push@p.iam.gserviceaccount.com', audience: 'me' };
    await core.createSubscription('with-token', { topic: 'events', pushConfig: { pushEndpoint: `${endpoint}/`, oidcToken } });
    await core.createSubscription('forbidden', { topic: 'events', pushConfig: { pushEndpoint: `${endpoint}/forbid`, oidcToken } });
    await core.createSubscription('without-token', { topic: 'events', pushConfig: { pushEndpoint: `${endpoint}/` } });
    await core.publish('events', [{ data: 'x' }]);
    const reason = (sub: string) => core.metrics(sub).lastNackReason?.message;
    await waitFor('a nack on each subscription', () =>
      ['with-token', 'forbidden', 'without-token'].every((sub) => reason(sub) !== undefined),
    );
    // Before, it read "push endpoint answered HTTP 401" alone: the endpoint looked at fault for a token Orderly never sent.
    const noToken = ' (Orderly sends no OIDC token: pushConfig.oidcToken is stored only, so the request carried no Authorization header)';
    expect(reason('with-token')).toBe(`push endpoint answered HTTP 401${noToken}`);
    expect(reason('forbidden')).toBe(`push endpoint answered HTTP 403${noToken}`);
    expect(reason('without-token')).toBe('push endpoint answered HTTP 401');
  });

  it('a subscription with more than ten push requests out at once prints no EventTarget leak warning', async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`);
    process.on('warning', onWarning);
    const held: ServerResponse[] = [];
    server = createServer((req, res) => {
      req.resume();
      req.on('end', () => held.push(res));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      await core.createSubscription('pushed', {
        topic: 'events',
        pushConfig: { pushEndpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}/push` },
      });
      await core.publish(
        'events',
        Array.from({ length: 12 }, (_, i) => ({ data: `m${i}` })),
      );
      // Each request listened on the subscription's shutdown signal: past ten, Node warned of a leak.
      await waitFor('12 requests held at once', () => held.length === 12);
      for (const res of held) res.writeHead(204).end();
      await waitFor('every push acked', () => core.metrics('pushed').backlogMessages === 0);
      await new Promise((r) => setImmediate(r));
      expect(warnings.filter((w) => w.startsWith('MaxListenersExceededWarning'))).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('closing the core cuts a request the endpoint answered 102 and then held, rather than leaving it open until the ack deadline', async () => {
    let closed = false;
    server = createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeProcessing());
      res.on('close', () => (closed = true));
    });
    await pushWithLongDeadline(server);
    await core.publish('events', [{ data: 'slow work' }]);
    await waitFor('the push acked on its 102', () => core.metrics('pushed').backlogMessages === 0);
    // Acked on the 102, so the drain had no request to wait for: the exchange (its socket, its 600 s timer)
    // lived on after close and kept a process that embeds the core from exiting.
    await core.close();
    // Far sooner than the request's 600 s deadline: cut by the close.
    await waitFor('the request cut', () => closed);
    server.closeAllConnections();
  });

  it('closing the core also ends a request out for a subscription that stopped pushing (made pull), within the grace', async () => {
    let received = false;
    let closed = false;
    server = createServer((req, res) => {
      received = true;
      req.resume();
      res.on('close', () => (closed = true));
    });
    await pushWithLongDeadline(server);
    await core.publish('events', [{ data: 'held' }]);
    await waitFor('the push at the endpoint', () => received);
    await core.updateSubscription('pushed', { pushConfig: null });
    // Its pusher was stopped and forgotten, so the close neither waited for its request nor cut it: the
    // request (its socket, its 600 s timer) outlived the core, and kept orderly serve from exiting.
    await core.close();
    // Far sooner than the request's 600 s deadline: cut by the close.
    await waitFor('the request cut', () => closed);
    server.closeAllConnections();
  });

  it("a failing push backs off (Pub/Sub's push backoff, 100 ms to 60 s) even under a retryPolicy of 0 s; a longer policy wins", async () => {
    server = createServer((_req, res) => res.writeHead(500).end());
    const endpoint = { pushEndpoint: 'http://127.0.0.1:9/push' };
    const zero = { minimumBackoff: 0, maximumBackoff: 0 };
    await core.createSubscription('pushed', { topic: 'events', pushConfig: endpoint, retryPolicy: zero });
    await core.createSubscription('pushed-slowly', { topic: 'events', pushConfig: endpoint, retryPolicy: { minimumBackoff: 10 } });
    await core.createSubscription('pulled', { topic: 'events', retryPolicy: zero });
    const delays = (sub: string) => [1, 2, 3, 11, 12].map((failures) => retryDelayMs(core.getSubscription(sub), failures));
    expect(delays('pushed')).toEqual([100, 200, 400, 60_000, 60_000]);
    expect(delays('pushed-slowly')).toEqual([10_000, 20_000, 40_000, 600_000, 600_000]);
    expect(delays('pulled')).toEqual([0, 0, 0, 0, 0]);
  });
});

describe('publisher-side ordering', () => {
  it('a failed publish pauses its ordering key until resumePublishing', async () => {
    const publisher = new Publisher(core, 'events');
    const ok1 = publisher.publish({ data: 'k1', orderingKey: 'k' });
    const bad = publisher.publish({ data: Buffer.alloc(10_000_001), orderingKey: 'k' });
    const other = publisher.publish({ data: 'j1', orderingKey: 'j' });
    await expect(ok1).resolves.toMatch(/^\d+$/);
    await expect(bad).rejects.toThrow('must be at most 10000000 bytes');
    await expect(other).resolves.toBeDefined();
    expect(publisher.isPaused('k')).toBe(true);
    await expect(publisher.publish({ data: 'k2', orderingKey: 'k' })).rejects.toBeInstanceOf(OrderingKeyPausedError);
    await expect(publisher.publish({ data: 'no key' })).resolves.toBeDefined();
    publisher.resumePublishing('k');
    await expect(publisher.publish({ data: 'k3', orderingKey: 'k' })).resolves.toBeDefined();
  });

  it('an ordering key that is no string (a caller without types) is refused as INVALID_ARGUMENT naming it', async () => {
    const publisher = new Publisher(core, 'events');
    const message = { data: 'x', orderingKey: 5 } as unknown as Parameters<Publisher['publish']>[0];
    await expect(publisher.publish(message)).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: 'messages[0].orderingKey: must be a string, got number',
    });
    await expect(publisher.publish(null as unknown as Parameters<Publisher['publish']>[0])).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      field: 'messages[0]',
    });
  });

  it('batches stay under the request limit counting attributes and keys, not data alone', async () => {
    // 110 valid messages of ~100 KB of attributes each (no data): one request of them would be ~11 MB.
    const attributes = Object.fromEntries(Array.from({ length: 99 }, (_, i) => [`a${i}`, 'v'.repeat(1024)]));
    await core.createSubscription('big-attributes', { topic: 'events', enableMessageOrdering: true });
    const publisher = new Publisher(core, 'events');
    const ids = await Promise.all(
      Array.from({ length: 110 }, (_, i) => publisher.publish({ attributes: { ...attributes, n: String(i) }, orderingKey: 'k' })),
    );
    expect(ids).toHaveLength(110);
    expect(publisher.isPaused('k')).toBe(false);
    await settle(core);
    // A Pull answer stops at one message past 9 MiB: the 11 MB come in two, each acked before the key's next.
    const got: number[] = [];
    for (let pulls = 0; got.length < 110 && pulls < 10; pulls++) {
      const batch = await core.pull('big-attributes', { maxMessages: 1000 });
      got.push(...batch.map((m) => Number(m.message.attributes.n)));
      await core.acknowledge(
        'big-attributes',
        batch.map((m) => m.ackId),
      );
    }
    expect(got).toEqual(Array.from({ length: 110 }, (_, i) => i));
  });

  it('flush waits for the publishes queued behind a batch in flight: closing the core after it refuses none', async () => {
    await core.createSubscription('kept', { topic: 'events', enableMessageOrdering: true });
    const publisher = new Publisher(core, 'events');
    // The first goes out alone; the other 29 of key k queue behind it (the next batch), as does nothing of the unkeyed one.
    const published = [
      ...Array.from({ length: 30 }, (_, i) => publisher.publish({ data: String(i), orderingKey: 'k' })),
      publisher.publish({ data: 'plain' }),
    ];
    await publisher.flush();
    await core.close();
    expect(await Promise.all(published)).toHaveLength(31);
    ({ core, clock } = await openCore(dir.path));
    const got = await core.pull('kept', { maxMessages: 100 });
    expect(got.map((m) => m.message.data.toString()).sort()).toEqual([...Array.from({ length: 30 }, (_, i) => String(i)), 'plain'].sort());
  });

  it('messages published on one key in one tick keep call order', async () => {
    await core.createSubscription('seq-check', { topic: 'events', enableMessageOrdering: true });
    const publisher = new Publisher(core, 'events');
    await Promise.all(Array.from({ length: 50 }, (_, i) => publisher.publish({ data: String(i), orderingKey: 'k' })));
    await settle(core);
    const got = await core.pull('seq-check', { maxMessages: 100 });
    expect(got.map((m) => Number(m.message.data.toString()))).toEqual(Array.from({ length: 50 }, (_, i) => i));
    expect(got.map((m) => m.message.sequence)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
  });
});
