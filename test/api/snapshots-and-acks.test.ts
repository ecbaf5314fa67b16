import * as grpc from '@grpc/grpc-js';
import { AckResponses, PubSub, type Message } from '@google-cloud/pubsub';
import { GoogleError } from 'google-gax';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_STATUS_DETAILS_BIN } from '../../src/api/status-details.js';
import { waitFor } from '../helpers/wait-for.js';
import { servePerFile } from '../helpers/serve-process.js';

/**
 * Snapshots, exactly-once delivery, DetachSubscription and StreamingPull on a missing subscription, against
 * a real `orderly serve`: with Google's Node client as an application uses it, with raw gRPC for what the
 * client hides (status details, stream confirmations), and over REST.
 */

const PROJECT = 'fidelity';
const { server, api } = servePerFile();
let pubsub: PubSub;

beforeAll(async () => {
  process.env.PUBSUB_EMULATOR_HOST = server.host;
  process.env.METADATA_SERVER_DETECTION = 'none';
  pubsub = new PubSub({ projectId: PROJECT });
});

afterAll(async () => {
  await pubsub?.close();
});

const sub = (id: string) => `projects/${PROJECT}/subscriptions/${id}`;
const topicName = (id: string) => `projects/${PROJECT}/topics/${id}`;

async function rest(method: string, path: string, body?: unknown, project = PROJECT): Promise<{ status: number; json: any }> {
  const res = await fetch(`http://${server.host}/v1/projects/${project}/${path}`, {
    method,
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}

/** The error a promise rejects with. */
async function failure(p: Promise<unknown>): Promise<any> {
  return p.then(
    () => {
      throw new Error('expected a failure');
    },
    (e: unknown) => e,
  );
}

/** A StreamingPull stream and what it received, until it ended (with which status). */
function openStream(first: Record<string, unknown>) {
  const call = api.subscriber.streamingPull() as grpc.ClientDuplexStream<any, any>;
  const responses: any[] = [];
  const ended = new Promise<grpc.StatusObject>((resolve) => {
    call.on('data', (r) => responses.push(r));
    call.on('error', () => undefined); // the status below says it
    call.on('status', resolve);
  });
  call.write({ streamAckDeadlineSeconds: 10, ...first });
  return { call, responses, ended };
}

describe("snapshots with Google's client", () => {
  it("createSnapshot, ack, snapshot.seek: exactly the snapshot's unacked set comes again, per key in order; getSnapshots pages", async () => {
    const [topic] = await pubsub.createTopic('snap-topic');
    const [subscription] = await topic.createSubscription('snap-sub', { enableMessageOrdering: true });
    topic.setPublishOptions({ messageOrdering: true });
    // x1 is acked (durably) before the snapshot: it is not part of it
    await topic.publishMessage({ data: Buffer.from('x1'), orderingKey: 'x' });
    const { receivedMessages } = await api.sub('pull', { subscription: subscription.name, maxMessages: 10 });
    await api.sub('acknowledge', { subscription: subscription.name, ackIds: receivedMessages.map((m: { ackId: string }) => m.ackId) });
    for (let i = 1; i <= 3; i++)
      await Promise.all(['a', 'b'].map((k) => topic.publishMessage({ data: Buffer.from(`${k}${i}`), orderingKey: k })));

    const [snapshot] = await subscription.createSnapshot('before-replay');
    expect(snapshot.name).toBe(`projects/${PROJECT}/snapshots/before-replay`);
    const seen: string[] = [];
    subscription.on('message', (m: Message) => {
      seen.push(m.data.toString());
      m.ack();
    });
    await waitFor('the backlog', () => seen.length === 6);
    await topic.publishMessage({ data: Buffer.from('c1'), orderingKey: 'c' }); // after the snapshot: unacked in it
    await waitFor('c1', () => seen.length === 7);
    const mark = seen.length;
    await snapshot.seek();
    await waitFor('the replay', () => seen.length >= mark + 7, 30_000);
    await subscription.close();
    const replay = seen.slice(mark);
    expect([...replay].sort()).toEqual(['a1', 'a2', 'a3', 'b1', 'b2', 'b3', 'c1']);
    for (const k of ['a', 'b']) expect(replay.filter((t) => t.startsWith(k))).toEqual([1, 2, 3].map((i) => `${k}${i}`));

    await subscription.createSnapshot('second');
    const names = [`projects/${PROJECT}/snapshots/before-replay`, `projects/${PROJECT}/snapshots/second`];
    const [all] = await pubsub.getSnapshots();
    expect(all.map((s) => s.name)).toEqual(names);
    // page by page, as the client does it without autoPaginate
    const [page1, next] = (await pubsub.getSnapshots({ pageSize: 1, autoPaginate: false })) as unknown as [
      { name: string }[],
      { pageToken: string },
    ];
    expect(page1.map((s) => s.name)).toEqual([names[0]]);
    const [page2, last] = (await pubsub.getSnapshots({ ...next, autoPaginate: false })) as unknown as [{ name: string }[], unknown];
    expect(page2.map((s) => s.name)).toEqual([names[1]]);
    expect(last).toBeNull();
    expect(await api.pub('listTopicSnapshots', { topic: topic.name })).toEqual({ snapshots: all.map((s) => s.name), nextPageToken: '' });
    await expect(subscription.createSnapshot('second')).rejects.toMatchObject({ code: grpc.status.ALREADY_EXISTS });
    await expect(subscription.seek(`projects/${PROJECT}/snapshots/missing`)).rejects.toMatchObject({ code: grpc.status.NOT_FOUND });
  }, 60_000);
});

describe('snapshot RPCs over gRPC', () => {
  it('get, update (labels, expire_time; other or empty masks refused), delete; seek needs a target', async () => {
    await api.pub('createTopic', { name: topicName('rpc-topic') });
    await api.sub('createSubscription', { name: sub('rpc-sub'), topic: topicName('rpc-topic') });
    const created = await api.sub('createSnapshot', {
      name: `projects/${PROJECT}/snapshots/rpc-snap`,
      subscription: sub('rpc-sub'),
      labels: { a: '1' },
    });
    expect(created).toMatchObject({ name: `projects/${PROJECT}/snapshots/rpc-snap`, topic: topicName('rpc-topic'), labels: { a: '1' } });
    expect(await api.sub('getSnapshot', { snapshot: created.name })).toEqual(created);
    const update = (paths: string[], snapshot: Record<string, unknown>) =>
      api.sub('updateSnapshot', { snapshot: { name: created.name, ...snapshot }, updateMask: { paths } });
    expect((await update(['labels'], { labels: { b: '2' } })).labels).toEqual({ b: '2' });
    const sooner = { seconds: String(Math.floor(Date.now() / 1000) + 3600), nanos: 0 };
    expect((await update(['expire_time'], { expireTime: sooner })).expireTime).toEqual(sooner);
    for (const [paths, field] of [
      [[], 'updateMask'],
      [['topic'], 'updateMask'],
      [['name'], 'updateMask'],
    ] as const) {
      const e = await failure(update([...paths], { topic: topicName('other') }));
      expect(e.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(e.details).toMatch(new RegExp(`^${field}: `));
    }
    expect((await failure(update(['expire_time'], { expireTime: { seconds: '1', nanos: 0 } }))).code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(
      (
        await failure(
          api.sub('createSnapshot', { name: 'projects/fidelity/snapshots/tagged', subscription: sub('rpc-sub'), tags: { 'k/v': 'x' } }),
        )
      ).details,
    ).toBe('tags: is not supported by Orderly');
    const unnamed = await api.sub('createSnapshot', { name: '', subscription: sub('rpc-sub') });
    expect(unnamed.name).toMatch(new RegExp(`^projects/${PROJECT}/snapshots/snapshot-`));
    expect((await failure(api.sub('seek', { subscription: sub('rpc-sub') }))).code).toBe(grpc.status.INVALID_ARGUMENT);
    // A Timestamp holds nanos 0-999,999,999 and the years 1-9999.
    const outOfRange = await failure(api.sub('seek', { subscription: sub('rpc-sub'), time: { seconds: '100', nanos: 2e9 } }));
    expect([outOfRange.code, outOfRange.details]).toEqual([
      grpc.status.INVALID_ARGUMENT,
      'time.nanos: must be an integer between 0 and 999999999, got 2000000000',
    ]);
    const tooLate = await failure(api.sub('seek', { subscription: sub('rpc-sub'), time: { seconds: '253402300800', nanos: 0 } }));
    expect(tooLate.details).toMatch(/^time\.seconds: must be a time between the years 1 and 9999/);
    await api.sub('seek', { subscription: sub('rpc-sub'), snapshot: created.name });
    await api.sub('deleteSnapshot', { snapshot: created.name });
    expect((await failure(api.sub('getSnapshot', { snapshot: created.name }))).code).toBe(grpc.status.NOT_FOUND);
    expect((await failure(api.sub('seek', { subscription: sub('rpc-sub'), snapshot: created.name }))).code).toBe(grpc.status.NOT_FOUND);
  });

  it('a seek to a time between two milliseconds acks a message published in the earlier one (the time is not rounded down)', async () => {
    await api.pub('createTopic', { name: topicName('seek-sub-ms') });
    await api.sub('createSubscription', { name: sub('seek-sub-ms'), topic: topicName('seek-sub-ms'), retainAckedMessages: true });
    await api.pub('publish', { topic: topicName('seek-sub-ms'), messages: [{ data: Buffer.from('m') }] });
    const pull = () => api.sub('pull', { subscription: sub('seek-sub-ms'), maxMessages: 10, returnImmediately: true });
    const [first] = (await pull()).receivedMessages;
    const published: { seconds: string; nanos: number } = first.message.publishTime;
    // Half a millisecond after the publish time (which Orderly keeps to the millisecond): the message was
    // published before it, so the seek marks it acked.
    const justAfter = { seconds: published.seconds, nanos: published.nanos + 500_000 };
    await api.sub('seek', { subscription: sub('seek-sub-ms'), time: justAfter });
    expect((await pull()).receivedMessages).toEqual([]);
    await api.sub('seek', { subscription: sub('seek-sub-ms'), time: published });
    expect((await pull()).receivedMessages.map((r: any) => r.message.data.toString())).toEqual(['m']);
  });
});

describe('exactly-once delivery', () => {
  it("ackWithResponse() in Google's client: SUCCESS for a valid lease, INVALID once the lease is gone (ordered too)", async () => {
    const [topic] = await pubsub.createTopic('eod-topic');
    const [subscription] = await topic.createSubscription('eod-sub', { enableExactlyOnceDelivery: true, enableMessageOrdering: true });
    topic.setPublishOptions({ messageOrdering: true });
    for (const d of ['k1', 'k2', 'k3']) await topic.publishMessage({ data: Buffer.from(d), orderingKey: 'k' });
    const order: string[] = [];
    const responses: string[] = [];
    let held: Message | undefined;
    subscription.on('message', (m: Message) => {
      order.push(m.data.toString());
      if (m.data.toString() === 'k3') held = m;
      else void m.ackWithResponse().then((r) => responses.push(r));
    });
    await waitFor('k1..k3', () => order.length === 3 && responses.length === 2, 30_000);
    expect(order).toEqual(['k1', 'k2', 'k3']);
    expect(responses).toEqual([AckResponses.Success, AckResponses.Success]);
    // a seek forgets every lease: the held message's ack id is no longer valid
    await subscription.seek(new Date(Date.now() + 1000));
    const e = await failure(held!.ackWithResponse());
    expect(e.errorCode).toBe(AckResponses.Invalid);
    await subscription.close();
  }, 60_000);

  it('Acknowledge with an invalid id: INVALID_ARGUMENT with ErrorInfo PERMANENT_FAILURE_INVALID_ACK_ID (gRPC and REST); StreamingPull confirms acks', async () => {
    await api.pub('createTopic', { name: topicName('eod-raw') });
    await api.sub('createSubscription', { name: sub('eod-raw-sub'), topic: topicName('eod-raw'), enableExactlyOnceDelivery: true });
    await api.sub('createSubscription', { name: sub('plain-raw-sub'), topic: topicName('eod-raw') });
    await api.pub('publish', { topic: topicName('eod-raw'), messages: [{ data: Buffer.from('m1') }] });

    const stream = openStream({ subscription: sub('eod-raw-sub') });
    await waitFor('a delivery', () => stream.responses.length === 1);
    const first = stream.responses[0];
    expect(first.subscriptionProperties).toMatchObject({ exactlyOnceDeliveryEnabled: true, messageOrderingEnabled: false });
    const ackId = first.receivedMessages[0].ackId as string;
    stream.call.write({ modifyDeadlineAckIds: [ackId, 'bogus'], modifyDeadlineSeconds: [30, 30] });
    await waitFor('the modack confirmation', () => stream.responses.length === 2);
    expect(stream.responses[1].modifyAckDeadlineConfirmation).toMatchObject({ ackIds: [ackId], invalidAckIds: ['bogus'] });
    stream.call.write({ ackIds: [ackId, 'bogus'] });
    await waitFor('the ack confirmation', () => stream.responses.length === 3);
    expect(stream.responses[2].acknowledgeConfirmation).toMatchObject({
      ackIds: [ackId],
      invalidAckIds: ['bogus'],
      unorderedAckIds: [],
      temporaryFailedAckIds: [],
    });
    stream.call.end();
    await stream.ended;

    // unary: the already-acked id is invalid now; Google's gax decodes the details as the client does
    const e = await failure(api.sub('acknowledge', { subscription: sub('eod-raw-sub'), ackIds: [ackId] }));
    expect(e.code).toBe(grpc.status.INVALID_ARGUMENT);
    const decoded = GoogleError.parseGRPCStatusDetails(e);
    expect(decoded).toMatchObject({
      reason: 'EXACTLY_ONCE_ACKID_FAILURE',
      domain: 'pubsub.googleapis.com',
      errorInfoMetadata: { [ackId]: 'PERMANENT_FAILURE_INVALID_ACK_ID' },
    });
    expect(
      (await failure(api.sub('modifyAckDeadline', { subscription: sub('eod-raw-sub'), ackIds: ['x'], ackDeadlineSeconds: 0 }))).code,
    ).toBe(grpc.status.INVALID_ARGUMENT);
    // the same over REST, in Google's JSON error shape
    const refused = await rest('POST', 'subscriptions/eod-raw-sub:acknowledge', { ackIds: ['x'] });
    expect(refused.status).toBe(400);
    expect(refused.json.error).toMatchObject({
      code: 400,
      status: 'INVALID_ARGUMENT',
      details: [
        {
          '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
          reason: 'EXACTLY_ONCE_ACKID_FAILURE',
          domain: 'pubsub.googleapis.com',
          metadata: { x: 'PERMANENT_FAILURE_INVALID_ACK_ID' },
        },
      ],
    });
    // an ordinary subscription ignores stale ids, as before (one of this stream's, and one never issued but of the form)
    const stale = ackId.replace(/-\d+$/, '-999999');
    expect(await rest('POST', 'subscriptions/plain-raw-sub:acknowledge', { ackIds: [ackId, stale] })).toEqual({ status: 200, json: {} });
    expect(await api.sub('acknowledge', { subscription: sub('plain-raw-sub'), ackIds: [stale] })).toEqual({});
    // and refuses a malformed one, naming it, as Pub/Sub does ("an invalid ack ID")
    const malformed = await rest('POST', 'subscriptions/plain-raw-sub:acknowledge', { ackIds: [stale, 'x'] });
    expect(malformed.status).toBe(400);
    expect(malformed.json.error.message).toBe('ackIds[1]: is not an ack id this server issued: "x"');
    expect(
      (await failure(api.sub('modifyAckDeadline', { subscription: sub('plain-raw-sub'), ackIds: [''], ackDeadlineSeconds: 0 }))).code,
    ).toBe(grpc.status.INVALID_ARGUMENT);
  });

  it('an Acknowledge of 2,500 expired ids fails at once over gRPC: its ErrorInfo lists what fits a trailer (it hung to the deadline); REST lists all', async () => {
    await api.pub('createTopic', { name: topicName('eod-many') });
    await api.sub('createSubscription', { name: sub('eod-many-sub'), topic: topicName('eod-many'), enableExactlyOnceDelivery: true });
    // ids of the form Orderly issues, as many as Google's client acks in one batch: none of them valid
    const ackIds = Array.from({ length: 2500 }, (_, i) => `1madbs8mxc7pv75-${i + 1}-1`);
    const e = await failure(
      new Promise((resolve, reject) =>
        api.subscriber.acknowledge(
          { subscription: sub('eod-many-sub'), ackIds },
          { deadline: Date.now() + 20_000 },
          (err: grpc.ServiceError | null, r: unknown) => (err ? reject(err) : resolve(r)),
        ),
      ),
    );
    expect(e.code).toBe(grpc.status.INVALID_ARGUMENT);
    const bin = e.metadata.get('grpc-status-details-bin')[0] as Buffer;
    expect(bin.length).toBeLessThanOrEqual(MAX_STATUS_DETAILS_BIN);
    const listed = Object.entries(GoogleError.parseGRPCStatusDetails(e).errorInfoMetadata as Record<string, string>);
    expect(listed.length).toBeGreaterThan(0);
    for (const [id, reason] of listed) {
      expect(ackIds).toContain(id);
      expect(reason).toBe('PERMANENT_FAILURE_INVALID_ACK_ID');
    }
    const refused = await rest('POST', 'subscriptions/eod-many-sub:acknowledge', { ackIds });
    expect(refused.status).toBe(400);
    expect(Object.keys(refused.json.error.details[0].metadata)).toHaveLength(2500);
  }, 60_000);
});

describe('DetachSubscription and StreamingPull errors', () => {
  it('StreamingPull on a missing subscription ends at once with NOT_FOUND', async () => {
    const stream = openStream({ subscription: sub('no-such-sub') });
    const status = await stream.ended;
    expect(status.code).toBe(grpc.status.NOT_FOUND);
    expect(status.details).toBe(`Subscription not found: ${sub('no-such-sub')}`);
    // Google's client reports it as an error on the subscription (a typo does not look like "no messages")
    const typo = pubsub.subscription('no-such-sub');
    const error = await new Promise<any>((resolve) => typo.on('error', resolve).on('message', () => undefined));
    expect(error.code).toBe(grpc.status.NOT_FOUND);
    await typo.close();
  });

  it("a later request's streamAckDeadlineSeconds is checked as the first one's (it changes the stream's deadline)", async () => {
    await api.pub('createTopic', { name: topicName('deadline-topic') });
    await api.sub('createSubscription', { name: sub('deadline-sub'), topic: topicName('deadline-topic') });
    const stream = openStream({ subscription: sub('deadline-sub') });
    stream.call.write({ streamAckDeadlineSeconds: 600 });
    stream.call.write({ streamAckDeadlineSeconds: 5 });
    const status = await stream.ended;
    expect([status.code, status.details]).toEqual([
      grpc.status.INVALID_ARGUMENT,
      'streamAckDeadlineSeconds: must be an integer between 10 and 600, got 5',
    ]);
  });

  it.each<[string, Record<string, unknown>, string]>([
    [
      'maxOutstandingMessages',
      { maxOutstandingMessages: 5 },
      'maxOutstandingMessages: can only be set in the first request of a stream, got 5 in a later one',
    ],
    [
      'maxOutstandingBytes',
      { maxOutstandingBytes: 1000 },
      'maxOutstandingBytes: can only be set in the first request of a stream, got 1000 in a later one',
    ],
    ['protocolVersion', { protocolVersion: 1 }, 'protocolVersion: can only be set in the first request of a stream, got 1 in a later one'],
    ['a malformed ack id', { ackIds: ['garbage'] }, 'ackIds[0]: is not an ack id this server issued: "garbage"'],
    [
      'a malformed modack id',
      { modifyDeadlineAckIds: ['a1-1-1', ''], modifyDeadlineSeconds: [30, 30] },
      'modifyDeadlineAckIds[1]: is not an ack id this server issued: ""',
    ],
  ])('a later request with %s ends the stream with INVALID_ARGUMENT, as in Pub/Sub (it was ignored)', async (field, later, details) => {
    const name = `late-${field.replace(/\W/g, '-')}`;
    await api.pub('createTopic', { name: topicName(name) });
    await api.sub('createSubscription', { name: sub(name), topic: topicName(name) });
    const stream = openStream({ subscription: sub(name), maxOutstandingMessages: 2 });
    // What Google's client sends later (keepalives, a new deadline, a stale id of the right form) is fine.
    stream.call.write({});
    stream.call.write({ streamAckDeadlineSeconds: 30, ackIds: ['a1-1-1'] });
    stream.call.write(later);
    const status = await stream.ended;
    expect([status.code, status.details]).toEqual([grpc.status.INVALID_ARGUMENT, details]);
  });

  it('detachSubscription keeps a detached subscription; its streams end and pull fails with FAILED_PRECONDITION; REST :detach too', async () => {
    const [topic] = await pubsub.createTopic('detach-topic');
    const [subscription] = await topic.createSubscription('detach-sub');
    const open = openStream({ subscription: subscription.name });
    await topic.publishMessage({ data: Buffer.from('m1') });
    await waitFor('a delivery', () => open.responses.length === 1);
    await pubsub.detachSubscription('detach-sub');
    const ended = await open.ended;
    expect(ended.code).toBe(grpc.status.FAILED_PRECONDITION);
    expect(ended.details).toMatch(/is detached from its topic/);
    expect((await subscription.getMetadata())[0]).toMatchObject({ name: subscription.name, topic: topic.name, detached: true });
    expect((await subscription.detached())[0]).toBe(true);
    expect((await failure(api.sub('pull', { subscription: subscription.name, maxMessages: 1 }))).code).toBe(
      grpc.status.FAILED_PRECONDITION,
    );
    expect((await openStream({ subscription: subscription.name }).ended).code).toBe(grpc.status.FAILED_PRECONDITION);
    const [subs] = await pubsub.getSubscriptions();
    expect(subs.find((s) => s.name === subscription.name)?.metadata?.detached).toBe(true);

    await rest('PUT', 'topics/detach-rest', {});
    await rest('PUT', 'subscriptions/detach-rest-sub', { topic: topicName('detach-rest') });
    expect(await rest('POST', 'subscriptions/detach-rest-sub:detach')).toEqual({ status: 200, json: {} });
    expect((await rest('GET', 'subscriptions/detach-rest-sub')).json).toMatchObject({ detached: true, topic: topicName('detach-rest') });
    expect((await rest('POST', 'subscriptions/detach-rest-sub:pull', { maxMessages: 1 })).json.error).toMatchObject({
      code: 400,
      status: 'FAILED_PRECONDITION',
    });
    expect(
      (await rest('PUT', 'subscriptions/born-detached', { topic: topicName('detach-rest'), detached: true })).json.error.message,
    ).toMatch(/^detached: /);
  }, 30_000);
});

describe('snapshots over REST', () => {
  const P = 'fidelity-rest';
  const call = (method: string, path: string, body?: unknown) => rest(method, path, body, P);
  const snap = (id: string) => `projects/${P}/snapshots/${id}`;
  it("PUT, GET, list with paging, PATCH, :seek {snapshot}, DELETE, in Google's JSON shapes", async () => {
    await call('PUT', 'topics/rest-snap-topic', {});
    await call('PUT', 'subscriptions/rest-snap-sub', { topic: `projects/${P}/topics/rest-snap-topic` });
    await call('POST', 'topics/rest-snap-topic:publish', { messages: [{ data: Buffer.from('m1').toString('base64') }] });
    const created = await call('PUT', 'snapshots/rest-snap', { subscription: 'rest-snap-sub', labels: { a: '1' } });
    expect(created.status).toBe(200);
    expect(created.json).toEqual({
      name: snap('rest-snap'),
      topic: `projects/${P}/topics/rest-snap-topic`,
      expireTime: expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/),
      labels: { a: '1' },
    });
    expect(
      (await call('PUT', 'snapshots/rest-snap', { subscription: `projects/${P}/subscriptions/rest-snap-sub` })).json.error,
    ).toMatchObject({ code: 409, status: 'ALREADY_EXISTS' });
    expect((await call('PUT', 'snapshots/rest-snap-2', {})).json.error.message).toMatch(/^subscription: is required/);
    expect((await call('PUT', 'snapshots/rest-snap-2', { subscription: 'rest-snap-sub', unknown: 1 })).json.error.message).toMatch(
      /^unknown: unknown field/,
    );
    await call('PUT', 'snapshots/rest-snap-2', { subscription: 'rest-snap-sub' });
    expect(await call('GET', 'snapshots/rest-snap')).toEqual(created);

    const first = await call('GET', 'snapshots?pageSize=1');
    expect(first.json.snapshots.map((s: { name: string }) => s.name)).toEqual([snap('rest-snap')]);
    const second = await call('GET', `snapshots?pageSize=1&pageToken=${first.json.nextPageToken}`);
    expect(second.json.snapshots.map((s: { name: string }) => s.name)).toEqual([snap('rest-snap-2')]);
    expect(second.json.nextPageToken).toBeUndefined();
    expect((await call('GET', 'snapshots?pageSize=x')).json.error.message).toMatch(/^pageSize: /);
    expect((await call('GET', 'topics/rest-snap-topic/snapshots')).json).toEqual({ snapshots: [snap('rest-snap'), snap('rest-snap-2')] });

    expect((await call('PATCH', 'snapshots/rest-snap', { snapshot: { labels: { b: '2' } }, updateMask: 'labels' })).json.labels).toEqual({
      b: '2',
    });
    expect((await call('PATCH', 'snapshots/rest-snap', { snapshot: { labels: {} } })).json.error.message).toMatch(
      /^updateMask: is required/,
    );
    expect((await call('PATCH', 'snapshots/rest-snap', { snapshot: { labels: {} }, updateMask: '' })).json.error.message).toMatch(
      /^updateMask: must name at least one field/,
    );
    expect((await call('PATCH', 'snapshots/rest-snap', { snapshot: { topic: 'x' }, updateMask: 'topic' })).json.error.message).toMatch(
      /^updateMask: unknown or read-only field path "topic"/,
    );

    const pulled = await call('POST', 'subscriptions/rest-snap-sub:pull', { maxMessages: 10, returnImmediately: true });
    await call('POST', 'subscriptions/rest-snap-sub:acknowledge', {
      ackIds: pulled.json.receivedMessages.map((m: { ackId: string }) => m.ackId),
    });
    expect(await call('POST', 'subscriptions/rest-snap-sub:seek', { snapshot: 'rest-snap' })).toEqual({ status: 200, json: {} });
    const again = await call('POST', 'subscriptions/rest-snap-sub:pull', { maxMessages: 10, returnImmediately: true });
    expect(again.json.receivedMessages.map((m: { message: { data: string } }) => Buffer.from(m.message.data, 'base64').toString())).toEqual(
      ['m1'],
    );
    expect(await call('DELETE', 'snapshots/rest-snap')).toEqual({ status: 200, json: {} });
    expect((await call('GET', 'snapshots/rest-snap')).status).toBe(404);
    expect((await call('POST', 'subscriptions/rest-snap-sub:seek', { snapshot: snap('rest-snap') })).json.error).toMatchObject({
      code: 404,
      status: 'NOT_FOUND',
    });
  });
});
