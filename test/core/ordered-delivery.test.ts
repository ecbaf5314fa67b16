import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ManualClock } from '../../src/core/clock.js';
import type { ReceivedMessage } from '../../src/core/message.js';
import type { PubSubCore } from '../../src/core/pubsub-core.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { openCore, settle } from '../helpers/core.js';
import { tempDir } from '../helpers/temp-dir.js';

let dir: ReturnType<typeof tempDir>;
let core: PubSubCore;
let clock: ManualClock;

beforeEach(async () => {
  dir = tempDir();
  ({ core, clock } = await openCore(dir.path));
  await core.createTopic('orders');
});
afterEach(async () => {
  await core.close();
  dir.remove();
});

const text = (m: ReceivedMessage) => m.message.data.toString();
const texts = (ms: ReceivedMessage[]) => ms.map(text);
async function publishKeyed(items: [key: string, data: string][]): Promise<void> {
  for (const [orderingKey, data] of items) await core.publish('orders', [{ data, orderingKey }]);
}
async function pullAll(sub: string, max = 1000): Promise<ReceivedMessage[]> {
  return core.pull(sub, { maxMessages: max });
}
/**
 * Pulls and acks until nothing is left; how many messages that took (the backlog metric then reads 0). An
 * empty pull while the metric still counts messages is retried for a while: the reader may still be
 * reading past rows that are not delivered (a filter's non-matching ones), a slice at a time.
 */
async function drain(sub: string): Promise<number> {
  let drained = 0;
  for (let idle = 0; idle < 100;) {
    const got = await pullAll(sub);
    if (!got.length) {
      if (core.metrics(sub).backlogMessages === 0) break;
      idle++;
      await new Promise((resolve) => setTimeout(resolve, 10));
      continue;
    }
    idle = 0;
    drained += got.length;
    await core.acknowledge(
      sub,
      got.map((m) => m.ackId),
    );
  }
  expect(core.metrics(sub).backlogMessages).toBe(0);
  return drained;
}

describe('ordered pull', () => {
  beforeEach(async () => {
    await core.createSubscription('ordered', { topic: 'orders', enableMessageOrdering: true });
  });

  it('delivers each key in publish order, one outstanding batch per key', async () => {
    await publishKeyed([
      ['a', 'a1'],
      ['b', 'b1'],
      ['a', 'a2'],
      ['b', 'b2'],
      ['a', 'a3'],
    ]);
    const first = await pullAll('ordered');
    expect(texts(first.filter((m) => m.message.orderingKey === 'a'))).toEqual(['a1', 'a2', 'a3']);
    expect(texts(first.filter((m) => m.message.orderingKey === 'b'))).toEqual(['b1', 'b2']);
    expect(first.map((m) => m.message.sequence).filter((_, i) => first[i]!.message.orderingKey === 'a')).toEqual([1, 2, 3]);
    await publishKeyed([['a', 'a4']]);
    expect(await pullAll('ordered')).toHaveLength(0); // key a has a batch out
    await core.acknowledge(
      'ordered',
      first.filter((m) => m.message.orderingKey === 'a').map((m) => m.ackId),
    );
    expect(texts(await pullAll('ordered'))).toEqual(['a4']);
  });

  it('a partially acked batch still blocks its key until every message settles', async () => {
    await publishKeyed([
      ['a', 'a1'],
      ['a', 'a2'],
    ]);
    const [m1, m2] = await pullAll('ordered');
    await core.acknowledge('ordered', [m2!.ackId]);
    await publishKeyed([['a', 'a3']]);
    expect(await pullAll('ordered')).toHaveLength(0);
    await core.acknowledge('ordered', [m1!.ackId]);
    expect(texts(await pullAll('ordered'))).toEqual(['a3']);
  });

  it('nack of the middle message redelivers it and every later message of the key, even acked ones', async () => {
    await publishKeyed([
      ['a', 'a1'],
      ['a', 'a2'],
      ['a', 'a3'],
      ['a', 'a4'],
      ['b', 'b1'],
    ]);
    const batch = await pullAll('ordered');
    const a = batch.filter((m) => m.message.orderingKey === 'a');
    await core.acknowledge('ordered', [a[0]!.ackId, a[2]!.ackId, a[3]!.ackId]); // a1, a3, a4 acked
    await core.modifyAckDeadline('ordered', [a[1]!.ackId], 0); // a2 nacked
    const again = await pullAll('ordered');
    expect(texts(again)).toEqual(['a2', 'a3', 'a4']);
    // b is untouched by a's redelivery
    expect(batch.find((m) => m.message.orderingKey === 'b')).toBeDefined();
  });

  it('a redelivered message that was acked before must be acked again', async () => {
    await publishKeyed([
      ['a', 'a1'],
      ['a', 'a2'],
    ]);
    const [a1, a2] = await pullAll('ordered');
    await core.acknowledge('ordered', [a2!.ackId]);
    await core.modifyAckDeadline('ordered', [a1!.ackId], 0);
    const [b1, b2] = await pullAll('ordered');
    await core.acknowledge('ordered', [b1!.ackId]); // a2's redelivery is left to expire
    clock.advance(10_100);
    expect(texts(await pullAll('ordered'))).toEqual(['a2']);
    expect(b2).toBeDefined();
  });

  it('expiry of the first message while later ones are acked redelivers all of them in order', async () => {
    await publishKeyed([
      ['k', '1'],
      ['k', '2'],
      ['k', '3'],
    ]);
    const batch = await pullAll('ordered');
    await core.acknowledge('ordered', [batch[1]!.ackId, batch[2]!.ackId]);
    clock.advance(9_000);
    expect(await pullAll('ordered')).toHaveLength(0);
    clock.advance(1_100); // past the 10 s ack deadline
    const again = await pullAll('ordered');
    expect(texts(again)).toEqual(['1', '2', '3']);
    expect(core.metrics('ordered').counters.expired).toBe(1);
  });

  it('stale ack ids of revoked deliveries are harmless and do not ack the redelivery', async () => {
    await publishKeyed([
      ['k', '1'],
      ['k', '2'],
    ]);
    const old = await pullAll('ordered');
    await core.modifyAckDeadline('ordered', [old[0]!.ackId], 0);
    await core.acknowledge('ordered', [old[1]!.ackId, 'nonsense']); // revoked by the nack
    await core.modifyAckDeadline('ordered', ['unknown-id'], 30);
    const again = await pullAll('ordered');
    expect(texts(again)).toEqual(['1', '2']);
    expect(core.metrics('ordered').backlogMessages).toBe(2);
  });

  it('modifyAckDeadline extends a lease; out-of-range deadlines are refused', async () => {
    await publishKeyed([['k', '1']]);
    const [m] = await pullAll('ordered');
    await core.modifyAckDeadline('ordered', [m!.ackId], 60);
    const probe = core.attach('ordered', { room: () => ({ messages: 0, bytes: 0 }), deliver: () => undefined });
    clock.advance(30_000);
    expect(probe.isLive(m!.ackId)).toBe(true);
    clock.advance(31_000);
    expect(probe.isLive(m!.ackId)).toBe(false);
    await expect(core.modifyAckDeadline('ordered', [m!.ackId], 601)).rejects.toThrow('between 0 and 600, got 601');
  });

  it('messages without an ordering key flow freely', async () => {
    await core.publish('orders', [{ data: 'x1' }, { data: 'x2' }, { data: 'x3' }]);
    const first = await pullAll('ordered', 1);
    const second = await pullAll('ordered', 5);
    expect(texts([...first, ...second]).sort()).toEqual(['x1', 'x2', 'x3']);
  });

  it('pull with waitMs returns as soon as a message is published', async () => {
    const waiting = core.pull('ordered', { maxMessages: 10, waitMs: 5_000 });
    await publishKeyed([['k', 'late']]);
    expect(texts(await waiting)).toEqual(['late']);
  });

  it('a pull whose caller gave up leases nothing: the next pull gets the message, as its first delivery attempt', async () => {
    await core.createTopic('dead-letters');
    await core.createSubscription('with-dlq', {
      topic: 'orders',
      deadLetterPolicy: { deadLetterTopic: 'dead-letters', maxDeliveryAttempts: 5 },
    });
    const attempts = (ms: ReceivedMessage[]) => ms.map((m) => [text(m), m.deliveryAttempt]);
    const gaveUp = new AbortController();
    const abandoned = core.pull('with-dlq', { maxMessages: 10, waitMs: 60_000, signal: gaveUp.signal });
    gaveUp.abort();
    const next = core.pull('with-dlq', { maxMessages: 10, waitMs: 5_000 });
    await publishKeyed([['k', 'late']]);
    expect(attempts(await next)).toEqual([['late', 1]]);
    expect(await abandoned).toEqual([]);
    // A call already gone when its pull starts takes nothing either, even with messages ready.
    await publishKeyed([['j', 'ready']]);
    expect(await core.pull('with-dlq', { maxMessages: 10, waitMs: 5_000, signal: gaveUp.signal })).toEqual([]);
    expect(attempts(await pullAll('with-dlq'))).toEqual([['ready', 1]]);
  });

  it('messages given back because their answer was never sent come again at once, in order, as the same delivery attempt', async () => {
    await core.createTopic('dead-letters');
    await core.createSubscription('given-back', {
      topic: 'orders',
      enableMessageOrdering: true,
      deadLetterPolicy: { deadLetterTopic: 'dead-letters', maxDeliveryAttempts: 5 },
      retryPolicy: { minimumBackoff: '60s', maximumBackoff: '60s' },
    });
    await publishKeyed([
      ['k', '1'],
      ['k', '2'],
    ]);
    const unsent = await pullAll('given-back');
    core.release(
      'given-back',
      unsent.map((m) => m.ackId),
    );
    // No backoff, no failure: the next pull (the clock has not moved) gets both, still attempt 1.
    const again = await pullAll('given-back');
    expect(again.map((m) => [text(m), m.deliveryAttempt])).toEqual([
      ['1', 1],
      ['2', 1],
    ]);
    const probe = core.attach('given-back', { room: () => ({ messages: 0, bytes: 0 }), deliver: () => undefined });
    expect(unsent.map((m) => probe.isLive(m.ackId))).toEqual([false, false]);
    // Both deliveries counted (the totals are Prometheus counters, which never go down); neither a redelivery.
    expect(core.metrics('given-back').counters).toMatchObject({ delivered: 4, redelivered: 0, nacked: 0, expired: 0 });
  });

  it('a delivery given back unsent never takes the delivered total down: Prometheus read the drop as a counter reset', async () => {
    await core.createSubscription('given-back-total', { topic: 'orders', enableMessageOrdering: true });
    await publishKeyed([['k', '1']]);
    const unsent = await pullAll('given-back-total');
    const before = core.metrics('given-back-total').counters;
    expect(before).toMatchObject({ delivered: 1, redelivered: 0 });
    core.release(
      'given-back-total',
      unsent.map((m) => m.ackId),
    );
    // Scraped between the give-back and the next delivery, the total went 1 -> 0: rate() and increase() count
    // any drop as a reset and add the whole new value again.
    expect(core.metrics('given-back-total').counters.delivered).toBeGreaterThanOrEqual(before.delivered);
    expect(core.metrics('given-back-total').counters.redelivered).toBeGreaterThanOrEqual(before.redelivered);
  });
});

describe('pipelined consumers (export runners)', () => {
  it("get a key's next messages while earlier ones are out; a nack revokes the later ones, which come again in order", async () => {
    await core.createSubscription('piped', { topic: 'orders', enableMessageOrdering: true });
    const got: ReceivedMessage[] = [];
    const rt = core.attach('piped', {
      maxPerKey: 100,
      pipelined: true,
      room: () => ({ messages: 100, bytes: 1e9 }),
      deliver: (b) => got.push(...b),
    });
    await publishKeyed([
      ['k', '1'],
      ['k', '2'],
    ]);
    await settle(core);
    await publishKeyed([['k', '3']]);
    await settle(core);
    expect(texts(got)).toEqual(['1', '2', '3']); // 3 arrived while 1 and 2 were still out
    expect(await pullAll('piped')).toHaveLength(0); // nobody else gets key k meanwhile
    await core.acknowledge('piped', [got[0]!.ackId]);
    await core.modifyAckDeadline('piped', [got[1]!.ackId], 0);
    expect(rt.isLive(got[2]!.ackId)).toBe(false);
    await settle(core);
    expect(texts(got.slice(3))).toEqual(['2', '3']);
  });
});

describe('unordered subscriptions', () => {
  it("deliver a key's messages in parallel and redeliver only the failed one", async () => {
    await core.createSubscription('free', { topic: 'orders' });
    await publishKeyed([
      ['k', '1'],
      ['k', '2'],
      ['k', '3'],
    ]);
    const one = await pullAll('free', 1);
    const rest = await pullAll('free', 10);
    expect(texts([...one, ...rest])).toEqual(['1', '2', '3']);
    await core.modifyAckDeadline('free', [one[0]!.ackId], 0);
    await core.acknowledge(
      'free',
      rest.map((m) => m.ackId),
    );
    expect(texts(await pullAll('free'))).toEqual(['1']);
  });
});

describe('delivery attempts, retry backoff and dead letters', () => {
  beforeEach(async () => {
    await core.createTopic('dead');
    await core.createSubscription('dead-sub', { topic: 'dead' });
  });

  it('deliveryAttempt is 0 without a dead-letter policy', async () => {
    await core.createSubscription('plain', { topic: 'orders', enableMessageOrdering: true });
    await publishKeyed([['k', '1']]);
    const [m] = await pullAll('plain');
    expect(m!.deliveryAttempt).toBe(0);
    await core.modifyAckDeadline('plain', [m!.ackId], 0);
    expect((await pullAll('plain'))[0]!.deliveryAttempt).toBe(0);
  });

  it('after maxDeliveryAttempts the message is dead-lettered with its attributes and the key moves on', async () => {
    await core.createSubscription('dl-sub', {
      topic: 'orders',
      enableMessageOrdering: true,
      deadLetterPolicy: { deadLetterTopic: 'dead', maxDeliveryAttempts: 5 },
    });
    await publishKeyed([
      ['k', 'poison'],
      ['k', 'next'],
    ]);
    const attempts: number[] = [];
    for (let i = 0; i < 5; i++) {
      const batch = await pullAll('dl-sub');
      expect(texts(batch)).toEqual(['poison', 'next']);
      attempts.push(batch[0]!.deliveryAttempt);
      await core.modifyAckDeadline('dl-sub', [batch[0]!.ackId], 0);
    }
    expect(attempts).toEqual([1, 2, 3, 4, 5]);
    await settle(core);
    const after = await pullAll('dl-sub');
    expect(texts(after)).toEqual(['next']);
    expect(after[0]!.deliveryAttempt).toBe(1);
    const [dead] = await pullAll('dead-sub');
    expect(text(dead!)).toBe('poison');
    expect(dead!.message.attributes).toMatchObject({
      CloudPubSubDeadLetterSourceDeliveryCount: '5',
      CloudPubSubDeadLetterSourceSubscription: 'dl-sub',
      CloudPubSubDeadLetterSourceSubscriptionProject: 'p',
      CloudPubSubDeadLetterSourceTopicPublishTime: new Date(clock.now()).toISOString(),
    });
    expect(core.metrics('dl-sub').counters.deadLettered).toBe(1);
  });

  it('a consumer that stops settling: every message of the key out expires, each counts it, and all are dead-lettered at maxDeliveryAttempts', async () => {
    await core.createSubscription('dl-stuck', {
      topic: 'orders',
      enableMessageOrdering: true,
      ackDeadlineSeconds: 10,
      deadLetterPolicy: { deadLetterTopic: 'dead', maxDeliveryAttempts: 5 },
      retryPolicy: { minimumBackoff: '0s', maximumBackoff: '0s' },
    });
    await publishKeyed([
      ['k', '1'],
      ['k', '2'],
      ['k', '3'],
    ]);
    const rounds: [string, number][][] = [];
    for (let i = 0; i < 5; i++) {
      const batch = await pullAll('dl-stuck');
      rounds.push(batch.map((m) => [text(m), m.deliveryAttempt]));
      clock.advance(10_100); // nothing is settled: every lease runs out
    }
    expect(rounds).toEqual(
      [1, 2, 3, 4, 5].map((n) => [
        ['1', n],
        ['2', n],
        ['3', n],
      ]),
    );
    expect(core.metrics('dl-stuck').counters.expired).toBe(15);
    // The fifth expiry of each dead-letters it: the key is done, in the dead-letter topic in order.
    await settle(core);
    expect(await pullAll('dl-stuck')).toEqual([]);
    await settle(core);
    expect(texts(await pullAll('dead-sub'))).toEqual(['1', '2', '3']);
    expect(core.metrics('dl-stuck').counters.deadLettered).toBe(3);
  });

  it('a policy added after a message failed more often than it allows: the message is delivered once more before it is dead-lettered', async () => {
    await core.createSubscription('dl-late', { topic: 'orders', enableMessageOrdering: true });
    await publishKeyed([['k', '1']]);
    for (let i = 0; i < 6; i++) await core.modifyAckDeadline('dl-late', [(await pullAll('dl-late'))[0]!.ackId], 0);
    await core.updateSubscription('dl-late', { deadLetterPolicy: { deadLetterTopic: 'dead', maxDeliveryAttempts: 5 } });
    clock.advance(1000);
    const [again] = await pullAll('dl-late');
    expect([text(again!), again!.deliveryAttempt]).toEqual(['1', 7]);
    await core.modifyAckDeadline('dl-late', [again!.ackId], 0);
    await settle(core);
    expect(texts(await pullAll('dead-sub'))).toEqual(['1']);
  });

  it('a message dead-lettered while an earlier one of its key was out is not delivered or dead-lettered again when that one fails', async () => {
    await core.createSubscription('dl-piped', {
      topic: 'orders',
      enableMessageOrdering: true,
      deadLetterPolicy: { deadLetterTopic: 'dead', maxDeliveryAttempts: 5 },
      retryPolicy: { minimumBackoff: '0s', maximumBackoff: '0s' },
    });
    const got: ReceivedMessage[] = [];
    const rt = core.attach('dl-piped', {
      maxPerKey: 100,
      pipelined: true,
      room: () => ({ messages: 100, bytes: 1e9 }),
      deliver: (b) => got.push(...b),
    });
    await publishKeyed([
      ['k', '1'],
      ['k', '2'],
    ]);
    await settle(core);
    const first = got.find((m) => text(m) === '1')!;
    // A sink refuses 2 five times while 1 is still out (held in an open file): 2 goes to the dead-letter topic.
    for (let i = 0; i < 5; i++) {
      const two = [...got].reverse().find((m) => text(m) === '2')!;
      await core.modifyAckDeadline('dl-piped', [two.ackId], 0);
      await settle(core);
    }
    // Then 1 fails (the file's upload): the key is delivered again from 1, without 2.
    await core.modifyAckDeadline('dl-piped', [first.ackId], 0);
    await settle(core);
    expect(got.map((m) => `${text(m)}@${m.deliveryAttempt}`)).toEqual(['1@1', '2@1', '2@2', '2@3', '2@4', '2@5', '1@2']);
    expect(rt.isLive(got.at(-1)!.ackId)).toBe(true);
    expect(texts(await pullAll('dead-sub'))).toEqual(['2']);
    expect(core.metrics('dl-piped').counters.deadLettered).toBe(1);
  });

  it('a sink error message travels to the dead-letter topic', async () => {
    await core.createSubscription('dl-sub', { topic: 'orders', deadLetterPolicy: { deadLetterTopic: 'dead' } });
    await publishKeyed([['', 'bad']]);
    for (let i = 0; i < 5; i++) {
      const [m] = await pullAll('dl-sub');
      await core.modifyAckDeadline('dl-sub', [m!.ackId], 0, 'column "x" does not exist');
    }
    await settle(core);
    const [dead] = await pullAll('dead-sub');
    expect(dead!.message.attributes.CloudPubSubDeadLetterSourceDeliveryErrorMessage).toBe('column "x" does not exist');
  });

  it("a dead-letter topic's schema applies: a conforming message gets its schema attributes, one that does not stays in its subscription and is retried", async () => {
    const schema = await core.schemas.create({
      parent: 'projects/p',
      schemaId: 'dead-shape',
      schema: { type: 'AVRO', definition: JSON.stringify({ type: 'record', name: 'R', fields: [{ name: 'id', type: 'int' }] }) },
    });
    await core.createTopic('typed-dead', { schemaSettings: { schema: schema.name, encoding: 'JSON' } });
    await core.createSubscription('typed-dead-sub', { topic: 'typed-dead' });
    await core.createSubscription('dl-typed', { topic: 'orders', deadLetterPolicy: { deadLetterTopic: 'typed-dead' } });
    await publishKeyed([
      ['', '{"id": 3}'],
      ['', 'not json'],
    ]);
    for (let i = 0; i < 5; i++) {
      const batch = await pullAll('dl-typed');
      await core.modifyAckDeadline(
        'dl-typed',
        batch.map((m) => m.ackId),
        0,
      );
    }
    await settle(core);
    const dead = await pullAll('typed-dead-sub');
    expect(texts(dead)).toEqual(['{"id": 3}']);
    expect(dead[0]!.message.attributes).toMatchObject({
      googclient_schemaname: schema.name,
      googclient_schemaencoding: 'JSON',
      googclient_schemarevisionid: schema.revisionId,
      CloudPubSubDeadLetterSourceDeliveryCount: '5',
    });
    const left = await pullAll('dl-typed');
    expect(texts(left)).toEqual(['not json']);
    expect(left[0]!.deliveryAttempt).toBe(6);
  });

  it('retryPolicy backs off exponentially, holding the whole key', async () => {
    await core.createSubscription('retry', {
      topic: 'orders',
      enableMessageOrdering: true,
      retryPolicy: { minimumBackoff: '10s', maximumBackoff: '30s' },
    });
    await publishKeyed([
      ['k', '1'],
      ['k', '2'],
      ['j', 'other'],
    ]);
    const waits: number[] = [];
    let batch = (await pullAll('retry')).filter((m) => m.message.orderingKey === 'k');
    for (let failure = 1; failure <= 3; failure++) {
      await core.modifyAckDeadline('retry', [batch[0]!.ackId], 0);
      let waited = 0;
      for (;;) {
        batch = (await pullAll('retry')).filter((m) => m.message.orderingKey === 'k');
        if (batch.length) break;
        clock.advance(1_000);
        waited += 1_000;
      }
      waits.push(waited);
      expect(texts(batch)).toEqual(['1', '2']);
    }
    // 10 s, 20 s, then capped at 30 s (+ one tick of the 100 ms timer granularity, rounded up to 1 s steps)
    expect(waits).toEqual([10_000, 20_000, 30_000]);
  });
});

describe('filters, seek, retention, flow control', () => {
  it('auto-acks messages that do not match the filter', async () => {
    await core.createSubscription('eu-only', { topic: 'orders', filter: 'attributes.region = "eu"' });
    await core.publish('orders', [
      { data: '1', attributes: { region: 'eu' } },
      { data: '2', attributes: { region: 'us' } },
      { data: '3' },
      { data: '4', attributes: { region: 'eu' } },
    ]);
    expect(texts(await pullAll('eu-only'))).toEqual(['1', '4']);
    expect(core.metrics('eu-only').backlogMessages).toBe(2);
  });

  describe("a filtered subscription's backlog is the messages that match its filter, as in Pub/Sub", () => {
    const eu = (n: number) => Array.from({ length: n }, (_, i) => ({ data: `eu${i}`, attributes: { region: 'eu' } }));
    const us = (n: number) => Array.from({ length: n }, (_, i) => ({ data: `us${i}`, attributes: { region: 'us' } }));
    beforeEach(async () => {
      // A window of 100 messages: most of the backlog stays in the store.
      await core.close();
      ({ core } = await openCore(dir.path, clock, { memory: { messagesPerSubscription: 100 } }));
      await core.createSubscription('eu-only', { topic: 'orders', filter: 'attributes.region = "eu"' });
    });

    it("of an ordered key over its share of the window, with messages the filter refuses among the key's", async () => {
      await core.close();
      ({ core } = await openCore(dir.path, clock, { memory: { messagesPerKey: 2 } }));
      await core.createSubscription('kept', { topic: 'orders', enableMessageOrdering: true, filter: 'attributes.keep = "y"' });
      for (let i = 0; i < 10; i++)
        await core.publish('orders', [{ data: `m${i}`, orderingKey: 'k', attributes: { keep: i % 2 ? 'n' : 'y' } }]);
      await settle(core);
      expect(core.metrics('kept').backlogMessages).toBe(5);
      const backlogs: number[] = [];
      for (let got = await core.pull('kept', { maxMessages: 1 }); got.length; got = await core.pull('kept', { maxMessages: 1 })) {
        await core.acknowledge(
          'kept',
          got.map((m) => m.ackId),
        );
        await settle(core);
        backlogs.push(core.metrics('kept').backlogMessages);
      }
      expect(backlogs).toEqual([4, 3, 2, 1, 0]);
    });

    it('published while the subscription is behind (running core)', async () => {
      await core.publish('orders', eu(200));
      for (let i = 0; i < 3; i++) await core.publish('orders', us(1000));
      await settle(core);
      expect(core.metrics('eu-only').backlogMessages).toBe(200);
      expect(await drain('eu-only')).toBe(200);
    });

    it('counted in the store after a restart, and its oldest unacked message is the oldest that matches', async () => {
      // Messages no reader has looked at yet, as a process killed before its reader reached them leaves
      // them: a running core acks non-matching messages as it reads them.
      await core.close();
      const store = SqliteStore.open(dir.path, { durability: 'process' });
      const topicUid = (await store.listTopics()).find((t) => t.name.endsWith('/orders'))!.uid;
      let seq = await store.lastSeq();
      const stored = (n: number, region: string) =>
        Array.from({ length: n }, () => ({
          seq: ++seq,
          topicUid,
          orderingKey: '',
          keySeq: seq,
          publishTime: clock.now(),
          data: Buffer.from(region),
          attributes: { region },
        }));
      await store.append(stored(3000, 'us'));
      clock.advance(60_000);
      const firstEu = clock.now();
      await store.append(stored(200, 'eu'));
      await store.close();
      ({ core } = await openCore(dir.path, clock, { memory: { messagesPerSubscription: 100 } }));
      core.countBacklogs();
      expect(core.metrics('eu-only')).toMatchObject({ backlogMessages: 200, oldestUnackedPublishTime: firstEu });
      await settle(core);
      expect(core.metrics('eu-only')).toMatchObject({ backlogMessages: 200, oldestUnackedPublishTime: firstEu });
      expect(await drain('eu-only')).toBe(200);
    });
  });

  it('fans out to every subscription: ordered and unordered see the same messages', async () => {
    await core.createSubscription('s-ordered', { topic: 'orders', enableMessageOrdering: true });
    await core.createSubscription('s-free', { topic: 'orders' });
    await publishKeyed([
      ['k', '1'],
      ['k', '2'],
    ]);
    expect(texts(await pullAll('s-ordered'))).toEqual(['1', '2']);
    expect(texts(await pullAll('s-free')).sort()).toEqual(['1', '2']);
  });

  it('publishes called in one turn keep call order per key, and a close commits every publish called before it', async () => {
    await core.createSubscription('burst', { topic: 'orders', enableMessageOrdering: true });
    const batches = Array.from({ length: 30 }, (_, b) =>
      Array.from({ length: 1000 }, (_, i) => ({ data: `${b}-${i}`, orderingKey: `k${i % 7}` })),
    );
    const published = batches.map((batch) => core.publish('orders', batch));
    await core.close();
    expect((await Promise.all(published)).flat()).toHaveLength(30_000);
    ({ core } = await openCore(dir.path, clock));
    const got = await core.pull('burst', { maxMessages: 1000 });
    const seen = new Map<string, string[]>();
    for (const m of got) seen.set(m.message.orderingKey, [...(seen.get(m.message.orderingKey) ?? []), text(m)]);
    const sent = new Map<string, string[]>();
    for (const m of batches.flat()) sent.set(m.orderingKey, [...(sent.get(m.orderingKey) ?? []), m.data]);
    // One batch per key is out at a time: what each key delivered is the head of what it was sent, in order.
    expect(got.length).toBeGreaterThan(0);
    for (const [key, texts] of seen) expect(texts).toEqual(sent.get(key)!.slice(0, texts.length));
    // The backlog past the window is counted in the background, 10,000 seqs a turn.
    await vi.waitFor(() => expect(core.metrics('burst').backlogMessages).toBe(30_000));
  });

  it('right after a restart the backlog metric never reads less than what waits in the store', async () => {
    await core.createSubscription('counted', { topic: 'orders' });
    for (let b = 0; b < 50; b++)
      await core.publish(
        'orders',
        Array.from({ length: 1000 }, (_, i) => ({ data: `${b}-${i}` })),
      );
    // The first 12,000 acked: more than the first range the background count takes at a start.
    for (let acked = 0; acked < 12_000;) {
      const got = await pullAll('counted');
      await core.acknowledge(
        'counted',
        got.map((m) => m.ackId),
      );
      acked += got.length;
    }
    await core.close();
    ({ core } = await openCore(dir.path, clock));
    // Before: 0 or the window's 20,000, while the count had not reached the rest (a process waiting for an
    // empty backlog stopped early on it).
    expect(core.metrics('counted').backlogMessages).toBeGreaterThanOrEqual(38_000);
    // A one-shot report (offline status) waits for the count: then the figure is exact.
    core.countBacklogs();
    expect(core.metrics('counted').backlogMessages).toBe(38_000);
  });

  it('a report that counts the backlog (offline status) names its hottest keys from the store, acked ones left out', async () => {
    await core.createSubscription('hot', { topic: 'orders', enableMessageOrdering: true });
    // Where the store's count is not what the running core would show: no keys without ordering, and a
    // filter the store cannot apply.
    await core.createSubscription('unordered', { topic: 'orders' });
    await core.createSubscription('filtered', { topic: 'orders', enableMessageOrdering: true, filter: 'attributes.x = "1"' });
    // Key k<n> gets n + 1 messages of each round (k0: 1 ... k5: 6), and some messages have no key.
    const rounds = 300;
    for (let r = 0; r < rounds; r++)
      await core.publish('orders', [
        ...Array.from({ length: 6 }, (_, n) => Array.from({ length: n + 1 }, () => ({ data: `${r}`, orderingKey: `k${n}` }))).flat(),
        { data: 'no key' },
      ]);
    // The first 250 messages of k5 acked: it has 1,550 left, k4 1,500 (a tie with nothing else), k3 1,200.
    let acked = 0;
    while (acked < 250) {
      const got = (await pullAll('hot')).filter((m) => m.message.orderingKey === 'k5').slice(0, 250 - acked);
      await core.acknowledge(
        'hot',
        got.map((m) => m.ackId),
      );
      acked += got.length;
    }
    await core.close();
    ({ core } = await openCore(dir.path, clock));
    // Nothing is read into memory without a consumer: the running core knows no key yet.
    expect(core.metrics('hot', 3).topKeys).toEqual([]);
    core.countBacklogs(3);
    expect(core.metrics('unordered', 3).topKeys).toEqual([]);
    expect(core.metrics('filtered', 3).topKeys).toEqual([]);
    expect(core.metrics('hot', 3).topKeys).toEqual([
      { orderingKey: 'k5', backlog: 1550 },
      { orderingKey: 'k4', backlog: 1500 },
      { orderingKey: 'k3', backlog: 1200 },
    ]);
    expect(core.metrics('hot').backlogMessages).toBe(rounds * 22 - 250);
    // Once a consumer reads the backlog, the figures are the window's again: the store's no longer add to them.
    const got = await pullAll('hot');
    expect(got.length).toBeGreaterThan(0);
    const left: Record<string, number> = { k0: 300, k1: 600, k2: 900, k3: 1200, k4: 1500, k5: 1550 };
    const keys = core.metrics('hot', 6).topKeys;
    expect(keys.length).toBeGreaterThan(0);
    for (const k of keys) expect(k.backlog).toBeLessThanOrEqual(left[k.orderingKey]!);
  });

  it('only messages published after creation are delivered', async () => {
    await publishKeyed([['k', 'before']]);
    await core.createSubscription('late', { topic: 'orders', enableMessageOrdering: true });
    await publishKeyed([['k', 'after']]);
    expect(texts(await pullAll('late'))).toEqual(['after']);
  });

  it('seek to a time: earlier messages acked, later ones delivered again (retainAckedMessages)', async () => {
    await core.createSubscription('replay', { topic: 'orders', enableMessageOrdering: true, retainAckedMessages: true });
    await publishKeyed([['k', '1']]);
    clock.advance(1_000);
    const mark = clock.now();
    await publishKeyed([
      ['k', '2'],
      ['k', '3'],
    ]);
    const all = await pullAll('replay');
    await core.acknowledge(
      'replay',
      all.map((m) => m.ackId),
    );
    expect(await pullAll('replay')).toHaveLength(0);
    await core.compact();
    await core.seek('replay', mark);
    expect(texts(await pullAll('replay'))).toEqual(['2', '3']);
    await core.seek('replay', mark + 60_000);
    expect(await pullAll('replay')).toHaveLength(0);
    // A time that is no time (an invalid Date) is refused and changes nothing: it used to replay all.
    for (const time of [new Date('not a date'), Number.NaN, Number.POSITIVE_INFINITY])
      await expect(core.seek('replay', time)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', field: 'time' });
    expect(await pullAll('replay')).toHaveLength(0);
  });

  it('seek to a time back without retention replays only what is unacked: acked messages are gone for the subscription', async () => {
    await core.createSubscription('kept-by-other', { topic: 'orders', enableMessageOrdering: true });
    await core.createSubscription('no-retention', { topic: 'orders', enableMessageOrdering: true });
    const mark = clock.now();
    clock.advance(1_000);
    await publishKeyed([
      ['a', 'a1'],
      ['b', 'b1'],
    ]);
    const all = await pullAll('no-retention');
    await core.acknowledge(
      'no-retention',
      all.filter((m) => m.message.orderingKey === 'a').map((m) => m.ackId),
    );
    // Past b's lease: it is unacked, and another subscription keeps both rows in the store.
    clock.advance(11_000);
    await core.compact();
    await core.seek('no-retention', mark);
    expect(texts(await pullAll('no-retention'))).toEqual(['b1']);
    // Topic retention keeps acked messages for every subscription of the topic: then the seek replays a1.
    await core.updateTopic('orders', { messageRetentionDuration: '1h' });
    await core.seek('no-retention', mark);
    expect(texts(await pullAll('no-retention')).sort()).toEqual(['a1', 'b1']);
  });

  it('retainAckedMessages keeps what the subscription acks from when it began retaining: a seek back replays nothing from before it existed, nor what it acked before retention was on', async () => {
    // Another subscription keeps every row in the store: only the seek's rule decides what comes back.
    await core.createSubscription('keeps-rows', { topic: 'orders', enableMessageOrdering: true });
    const start = clock.now();
    clock.advance(1_000);
    await publishKeyed([['k', 'before-created']]);
    await core.createSubscription('late', { topic: 'orders', enableMessageOrdering: true, retainAckedMessages: true });
    await core.createSubscription('turned-on', { topic: 'orders', enableMessageOrdering: true });
    await publishKeyed([['k', 'acked-before-on']]);
    await core.acknowledge(
      'turned-on',
      (await pullAll('turned-on')).map((m) => m.ackId),
    );
    // Not compacted yet: the store's watermark is still below the acked message (found by helper-58).
    await publishKeyed([['p', 'unacked-when-on']]);
    await core.updateSubscription('turned-on', { retainAckedMessages: true });
    await publishKeyed([['k', 'acked-after-on']]);
    for (const sub of ['late', 'turned-on'])
      await core.acknowledge(
        sub,
        (await pullAll(sub)).map((m) => m.ackId),
      );
    await core.seek('late', start);
    expect(texts(await pullAll('late')).sort()).toEqual(['acked-after-on', 'acked-before-on', 'unacked-when-on']);
    await core.seek('turned-on', start);
    expect(texts(await pullAll('turned-on')).sort()).toEqual(['acked-after-on', 'unacked-when-on']);
    // The topic's own retention keeps them all, from before the subscription too (Pub/Sub's topic retention).
    await core.updateTopic('orders', { messageRetentionDuration: '1h' });
    await core.seek('late', start);
    expect(texts(await pullAll('late')).sort()).toEqual(['acked-after-on', 'acked-before-on', 'before-created', 'unacked-when-on']);
  });

  it('messages past messageRetentionDuration leave the backlog', async () => {
    await core.createSubscription('short', { topic: 'orders', enableMessageOrdering: true, messageRetentionDuration: '10m' });
    await publishKeyed([['k', 'old']]);
    clock.advance(9 * 60_000);
    await publishKeyed([['k', 'young']]);
    clock.advance(61_000);
    expect(texts(await pullAll('short'))).toEqual(['young']);
    await core.compact();
    expect(core.metrics('short').backlogMessages).toBe(1);
  });

  it('flow control caps outstanding messages per subscriber; the callback of a key runs after the previous settled', async () => {
    await core.createSubscription('callback', { topic: 'orders', enableMessageOrdering: true });
    const log: string[] = [];
    let running = 0;
    let maxRunning = 0;
    const release: (() => void)[] = [];
    const sub = core.subscribe(
      'callback',
      async (m) => {
        running++;
        maxRunning = Math.max(maxRunning, running);
        log.push(`start ${m.message.orderingKey}${text(m)}`);
        await new Promise<void>((r) => release.push(r));
        log.push(`end ${m.message.orderingKey}${text(m)}`);
        running--;
      },
      { flowControl: { maxMessages: 2 } },
    );
    await core.publish('orders', [
      { data: '1', orderingKey: 'a' },
      { data: '2', orderingKey: 'a' },
      { data: '1', orderingKey: 'b' },
      { data: '1', orderingKey: 'c' },
    ]);
    await settle(core);
    expect(sub.outstanding).toBe(2); // flow control: a's batch of two fills the subscriber
    expect(log).toEqual(['start a1']);
    while (log.filter((l) => l.startsWith('end')).length < 4) {
      release.shift()?.();
      await settle(core);
    }
    expect(log.indexOf('end a1')).toBeLessThan(log.indexOf('start a2'));
    expect(maxRunning).toBeLessThanOrEqual(2);
    await sub.close();
    expect(core.metrics('callback').backlogMessages).toBe(0);
  });

  it('a flow control limit that leaves no room (0, negative, NaN) is refused, not a subscriber that never gets a message', async () => {
    await core.createSubscription('no-room', { topic: 'orders' });
    for (const [field, flowControl] of [
      ['flowControl.maxMessages', { maxMessages: 0 }],
      ['flowControl.maxMessages', { maxMessages: -1 }],
      ['flowControl.maxBytes', { maxBytes: 0 }],
      ['flowControl.maxBytes', { maxBytes: Number.NaN }],
    ] as const) {
      expect(() => core.subscribe('no-room', () => undefined, { flowControl }), field).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT', field }),
      );
    }
    // Nothing was left attached: a message published now waits for a subscriber that can take it.
    await core.publish('orders', [{ data: 'waits' }]);
    expect(texts(await core.pull('no-room'))).toEqual(['waits']);
  });

  it('a key with outstanding messages stays with its subscriber; idle keys may move', async () => {
    await core.createSubscription('aff', { topic: 'orders', enableMessageOrdering: true });
    const seen = new Map<string, Set<string>>();
    const handler = (who: string) => async (m: ReceivedMessage) => {
      const set = seen.get(m.message.orderingKey) ?? new Set();
      set.add(who);
      seen.set(m.message.orderingKey, set);
      await settle(core);
    };
    const s1 = core.subscribe('aff', handler('s1'), { flowControl: { maxMessages: 50 } });
    const s2 = core.subscribe('aff', handler('s2'), { flowControl: { maxMessages: 50 } });
    // all messages published in one go: each key's batch goes to one subscriber only
    await core.publish(
      'orders',
      Array.from({ length: 200 }, (_, i) => ({ data: String(i), orderingKey: `k${i % 20}` })),
    );
    for (let i = 0; i < 50 && core.metrics('aff').backlogMessages > 0; i++) await settle(core);
    expect(core.metrics('aff').backlogMessages).toBe(0);
    expect(new Set([...seen.values()].flatMap((s) => [...s]))).toEqual(new Set(['s1', 's2']));
    await s1.close();
    await s2.close();
  });
});

describe('topics and subscriptions', () => {
  it('create/get/list/update/delete with Pub/Sub errors', async () => {
    await expect(core.createTopic('orders')).rejects.toMatchObject({ code: 'ALREADY_EXISTS' });
    expect(() => core.getTopic('missing')).toThrow('Topic not found: projects/p/topics/missing');
    await core.createSubscription('s-one', { topic: 'orders', ackDeadlineSeconds: 20 });
    await expect(core.createSubscription('s-one', { topic: 'orders' })).rejects.toMatchObject({ code: 'ALREADY_EXISTS' });
    await expect(core.createSubscription('s-two', { topic: 'nope' })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(core.createSubscription('s-three', { topic: 'orders', deadLetterPolicy: { deadLetterTopic: 'nope' } })).rejects.toThrow(
      'Dead-letter topic not found: projects/p/topics/nope',
    );
    expect(core.listTopicSubscriptions('orders')).toEqual(['projects/p/subscriptions/s-one']);
    const updated = await core.updateSubscription('s-one', { ackDeadlineSeconds: 60 });
    expect(updated.ackDeadlineSeconds).toBe(60);
    // A dead-letter topic deleted since blocks only a change of the policy, not every other change.
    await core.createTopic('dead');
    await core.updateSubscription('s-one', { deadLetterPolicy: { deadLetterTopic: 'dead' } });
    await core.deleteTopic('dead');
    expect((await core.updateSubscription('s-one', { labels: { team: 'a' } })).labels).toEqual({ team: 'a' });
    await expect(
      core.updateSubscription('s-one', { deadLetterPolicy: { deadLetterTopic: 'dead', maxDeliveryAttempts: 6 } }),
    ).rejects.toThrow('Dead-letter topic not found: projects/p/topics/dead');
    await expect(core.updateSubscription('s-one', { enableMessageOrdering: true })).rejects.toMatchObject({
      code: 'FAILED_PRECONDITION',
    });
    await core.deleteTopic('orders');
    expect(core.getSubscription('s-one').topic).toBe('_deleted-topic_');
    await core.deleteSubscription('s-one');
    expect(core.listSubscriptions()).toEqual([]);
  });
});
