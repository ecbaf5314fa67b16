import { PubSub, type Message } from '@google-cloud/pubsub';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait-for.js';

const bin = fileURLToPath(new URL('../../bin/orderly.js', import.meta.url));
let server: ChildProcess;
let pubsub: PubSub;
let dir: ReturnType<typeof tempDir>;

beforeAll(async () => {
  dir = tempDir();
  server = spawn(process.execPath, [bin, 'serve', '--port', '0', '--data-dir', dir.path], { stdio: ['ignore', 'pipe', 'inherit'] });
  const host = await new Promise<string>((resolve, reject) => {
    let out = '';
    server.stdout!.on('data', (c) => {
      out += c;
      const m = /PUBSUB_EMULATOR_HOST=(\S+)\)/.exec(out);
      if (m) resolve(m[1]!);
    });
    server.on('exit', (code) => reject(new Error(`orderly serve exited (${code})`)));
  });
  process.env.PUBSUB_EMULATOR_HOST = host;
  process.env.METADATA_SERVER_DETECTION = 'none';
  pubsub = new PubSub({ projectId: 'test-project' });
});

afterAll(async () => {
  await pubsub?.close();
  server?.kill('SIGTERM');
  await new Promise((r) => server?.once('exit', r));
  dir.remove();
});

describe("Google's Node client (@google-cloud/pubsub@5) against orderly serve", () => {
  it('the ordering flow: per-key order, and a nack redelivers that message and every later one of its key', async () => {
    const [topic] = await pubsub.createTopic('orders');
    const [subscription] = await topic.createSubscription('orders-ordered', { enableMessageOrdering: true });
    topic.setPublishOptions({ messageOrdering: true });
    const keys = ['a', 'b', 'c'];
    for (let i = 1; i <= 5; i++) {
      await Promise.all(keys.map((k) => topic.publishMessage({ data: Buffer.from(`${k}${i}`), orderingKey: k })));
    }
    const seen: string[] = [];
    let nacked = false;
    subscription.on('message', (m: Message) => {
      const text = m.data.toString();
      seen.push(text);
      if (text === 'a2' && !nacked) {
        nacked = true;
        return m.nack();
      }
      m.ack();
    });
    await waitFor(
      'all messages',
      () => keys.every((k) => seen.includes(`${k}5`)) && seen.filter((t) => t.startsWith('a')).length >= 9,
      30_000,
    );
    await subscription.close();
    for (const k of ['b', 'c']) expect(seen.filter((t) => t.startsWith(k))).toEqual([1, 2, 3, 4, 5].map((i) => `${k}${i}`));
    // a2 was nacked: a2 and everything after it come again, in order (a3.. may have been received once before)
    const a = seen.filter((t) => t.startsWith('a'));
    const again = a.lastIndexOf('a2');
    expect(a.slice(0, 2)).toEqual(['a1', 'a2']);
    expect(a.slice(again)).toEqual(['a2', 'a3', 'a4', 'a5']);
  }, 60_000);

  it('unordered subscriptions, filters, flow control and seek', async () => {
    const [topic] = await pubsub.createTopic('mixed');
    const [free] = await topic.createSubscription('mixed-free');
    const [eu] = await topic.createSubscription('mixed-eu', { filter: 'attributes.region = "eu"' });
    for (let i = 0; i < 20; i++) await topic.publishMessage({ data: Buffer.from(String(i)), attributes: { region: i % 2 ? 'eu' : 'us' } });
    const got = { free: [] as string[], eu: [] as string[] };
    let running = 0;
    let maxRunning = 0;
    free.setOptions({ flowControl: { maxMessages: 3, allowExcessMessages: false } });
    free.on('message', (m: Message) => {
      running++;
      maxRunning = Math.max(maxRunning, running);
      setTimeout(() => {
        got.free.push(m.data.toString());
        running--;
        m.ack();
      }, 10);
    });
    eu.on('message', (m: Message) => {
      got.eu.push(m.data.toString());
      m.ack();
    });
    await waitFor('deliveries', () => got.free.length === 20 && got.eu.length === 10, 30_000);
    expect(got.free.map(Number).sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(got.eu.map(Number).sort((a, b) => a - b)).toEqual([1, 3, 5, 7, 9, 11, 13, 15, 17, 19]);
    expect(maxRunning).toBeLessThanOrEqual(3);
    await free.close();
    // seek back to just before a publish: that message comes again
    const [replay] = await topic.createSubscription('mixed-replay', { retainAckedMessages: true });
    // Google's client sends `nanos` as milliseconds x 1000, so its seek time is in effect whole seconds:
    // seek to the next second boundary and publish just after it.
    const before = new Date(Math.ceil((Date.now() + 20) / 1000) * 1000);
    await new Promise((r) => setTimeout(r, before.getTime() - Date.now() + 20));
    await topic.publishMessage({ data: Buffer.from('x') });
    const seen: string[] = [];
    replay.on('message', (m: Message) => {
      seen.push(m.data.toString());
      m.ack();
    });
    await waitFor('first delivery', () => seen.length === 1, 30_000);
    await replay.seek(before);
    await waitFor('replay', () => seen.length === 2, 30_000);
    expect(seen).toEqual(['x', 'x']);
    await replay.close();
    await eu.close();
  }, 60_000);

  it('many keys over two subscribers: a key is never out on two streams at once, and stays in order', async () => {
    const [topic] = await pubsub.createTopic('fanout');
    await topic.createSubscription('fanout-sub', { enableMessageOrdering: true });
    topic.setPublishOptions({ messageOrdering: true });
    const log: { key: string; n: number; who: string; start: number; end: number }[] = [];
    const clients: PubSub[] = [];
    const listen = (who: string) => {
      const client = new PubSub({ projectId: 'test-project' });
      clients.push(client);
      const sub = client.subscription('fanout-sub', { flowControl: { maxMessages: 10, allowExcessMessages: false } });
      sub.on('message', (m: Message) => {
        const start = performance.now();
        setTimeout(() => {
          log.push({ key: m.orderingKey!, n: Number(m.data.toString()), who, start, end: performance.now() });
          m.ack();
        }, 2);
      });
      return sub;
    };
    const subs = [listen('first'), listen('second')];
    await new Promise((r) => setTimeout(r, 1000)); // both clients' streams are open
    const KEYS = 40;
    await Promise.all(
      Array.from({ length: 400 }, (_, i) =>
        topic.publishMessage({ data: Buffer.from(String(Math.floor(i / KEYS))), orderingKey: `key-${i % KEYS}` }),
      ),
    );
    await waitFor('all 400', () => log.length >= 400, 60_000);
    await Promise.all(subs.map((s) => s.close()));
    await Promise.all(clients.map((c) => c.close()));
    for (let k = 0; k < KEYS; k++) {
      const mine = log.filter((l) => l.key === `key-${k}`);
      expect(mine.map((l) => l.n)).toEqual(Array.from({ length: 10 }, (_, i) => i));
      for (let i = 1; i < mine.length; i++) {
        // a key may move between subscribers only when nothing of it is outstanding
        if (mine[i]!.who !== mine[i - 1]!.who) expect(mine[i]!.start).toBeGreaterThanOrEqual(mine[i - 1]!.end);
      }
    }
    expect(new Set(log.map((l) => l.who))).toEqual(new Set(['first', 'second']));
  }, 90_000);

  it('exists(), getMetadata() and error codes as Google returns them', async () => {
    const topic = pubsub.topic('meta-topic');
    expect((await topic.exists())[0]).toBe(false);
    await topic.create();
    expect((await topic.exists())[0]).toBe(true);
    await expect(topic.create()).rejects.toMatchObject({ code: 6 }); // ALREADY_EXISTS
    const [sub] = await topic.createSubscription('meta-sub', { enableMessageOrdering: true, ackDeadlineSeconds: 30 });
    const [metadata] = await sub.getMetadata();
    expect(metadata).toMatchObject({
      enableMessageOrdering: true,
      ackDeadlineSeconds: 30,
      topic: 'projects/test-project/topics/meta-topic',
    });
    await expect(pubsub.subscription('nope-sub').getMetadata()).rejects.toMatchObject({ code: 5 }); // NOT_FOUND
    await expect(topic.createSubscription('bad-sub', { ackDeadlineSeconds: 5 })).rejects.toMatchObject({ code: 3 }); // INVALID_ARGUMENT
  });

  it("setMetadata naming a field fixed at creation is INVALID_ARGUMENT ('Invalid update_mask'), as Pub/Sub answers", async () => {
    const [topic] = await pubsub.createTopic('immutable-topic');
    const [other] = await pubsub.createTopic('immutable-other');
    const [sub] = await topic.createSubscription('immutable-sub', { filter: 'attributes:a' });
    // The client sends the keys given as the update mask (enable_message_ordering, filter, topic).
    for (const change of [{ enableMessageOrdering: true }, { filter: 'attributes:b' }, { topic: other.name }, { filter: 'attributes:a' }]) {
      await expect(sub.setMetadata(change), JSON.stringify(change)).rejects.toMatchObject({
        code: 3, // INVALID_ARGUMENT, not FAILED_PRECONDITION
        details: expect.stringMatching(/^updateMask: the '(enable_message_ordering|filter|topic)' field of a subscription is not mutable/),
      });
    }
    // The subscription is unchanged, and a mutable field still updates.
    const [metadata] = await sub.setMetadata({ ackDeadlineSeconds: 42 });
    expect(metadata).toMatchObject({ enableMessageOrdering: false, filter: 'attributes:a', topic: topic.name, ackDeadlineSeconds: 42 });
  });

  it('dead-letters with the CloudPubSubDeadLetterSource attributes after maxDeliveryAttempts', async () => {
    const [topic] = await pubsub.createTopic('dl-source');
    const [dead] = await pubsub.createTopic('dl-dead');
    const [deadSub] = await dead.createSubscription('dl-dead-sub');
    const [sub] = await topic.createSubscription('dl-sub', { deadLetterPolicy: { deadLetterTopic: dead.name, maxDeliveryAttempts: 5 } });
    await topic.publishMessage({ data: Buffer.from('poison') });
    const attempts: number[] = [];
    sub.on('message', (m: Message) => {
      attempts.push(m.deliveryAttempt);
      m.nack();
    });
    const got: Message[] = [];
    deadSub.on('message', (m: Message) => {
      got.push(m);
      m.ack();
    });
    await waitFor('the dead letter', () => got.length === 1, 30_000);
    await sub.close();
    await deadSub.close();
    expect(attempts).toEqual([1, 2, 3, 4, 5]);
    expect(got[0]!.attributes).toMatchObject({
      CloudPubSubDeadLetterSourceDeliveryCount: '5',
      CloudPubSubDeadLetterSourceSubscription: 'dl-sub',
    });
  }, 60_000);
});

describe('REST/JSON v1 on the same port (plain fetch)', () => {
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`http://${process.env.PUBSUB_EMULATOR_HOST}/v1/projects/rest-project/${path}`, {
      method,
      headers: { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, json: await res.json() };
  };

  it('topics, subscriptions, :publish, :pull, :acknowledge, :modifyAckDeadline, with proto3 JSON', async () => {
    expect((await call('PUT', 'topics/rest-topic', {})).json).toEqual({ name: 'projects/rest-project/topics/rest-topic', state: 'ACTIVE' });
    const created = await call('PUT', 'subscriptions/rest-sub', {
      topic: 'projects/rest-project/topics/rest-topic',
      enableMessageOrdering: true,
      messageRetentionDuration: '600s',
      ackDeadlineSeconds: 20,
    });
    expect(created.json).toMatchObject({
      name: 'projects/rest-project/subscriptions/rest-sub',
      messageRetentionDuration: '600s',
      ackDeadlineSeconds: 20,
      state: 'ACTIVE',
    });
    const published = await call('POST', 'topics/rest-topic:publish', {
      messages: ['k1', 'k2', 'k3'].map((d) => ({ data: Buffer.from(d).toString('base64'), orderingKey: 'k', attributes: { n: d } })),
    });
    expect(published.json.messageIds).toHaveLength(3);
    const pulled = await call('POST', 'subscriptions/rest-sub:pull', { maxMessages: 10, returnImmediately: true });
    const msgs = pulled.json.receivedMessages as {
      ackId: string;
      message: { data: string; orderingKey: string; publishTime: string; messageId: string };
    }[];
    expect(msgs.map((m) => Buffer.from(m.message.data, 'base64').toString())).toEqual(['k1', 'k2', 'k3']);
    expect(msgs[0]!.message.publishTime).toMatch(/^\d{4}-\d{2}-\d{2}T/);
    // nack the second: it and the third come again
    await call('POST', 'subscriptions/rest-sub:acknowledge', { ackIds: [msgs[0]!.ackId] });
    await call('POST', 'subscriptions/rest-sub:modifyAckDeadline', { ackIds: [msgs[1]!.ackId], ackDeadlineSeconds: 0 });
    const again = await call('POST', 'subscriptions/rest-sub:pull', { maxMessages: 10, returnImmediately: true });
    expect(again.json.receivedMessages.map((m: { message: { data: string } }) => Buffer.from(m.message.data, 'base64').toString())).toEqual(
      ['k2', 'k3'],
    );
    await call('POST', 'subscriptions/rest-sub:acknowledge', {
      ackIds: again.json.receivedMessages.map((m: { ackId: string }) => m.ackId),
    });
    const seek = await call('POST', 'subscriptions/rest-sub:seek', { time: new Date(Date.now() - 60_000).toISOString() });
    expect(seek.status).toBe(200);
  });

  it("errors in Google's JSON form with the status and the field", async () => {
    expect(await call('GET', 'topics/missing-topic')).toEqual({
      status: 404,
      json: { error: { code: 404, status: 'NOT_FOUND', message: 'Topic not found: projects/rest-project/topics/missing-topic' } },
    });
    await call('PUT', 'topics/twice-topic', {});
    expect((await call('PUT', 'topics/twice-topic', {})).json.error).toMatchObject({ code: 409, status: 'ALREADY_EXISTS' });
    const bad = await call('PUT', 'subscriptions/bad-sub', { topic: 'projects/rest-project/topics/twice-topic', ackDeadlineSeconds: 700 });
    expect(bad).toEqual({
      status: 400,
      json: {
        error: { code: 400, status: 'INVALID_ARGUMENT', message: 'ackDeadlineSeconds: must be an integer between 10 and 600, got 700' },
      },
    });
  });
});
