import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { InvalidAckIdsError } from '../../src/core/ack-results.js';
import type { ManualClock } from '../../src/core/clock.js';
import type { ReceivedMessage } from '../../src/core/message.js';
import type { PubSubCore } from '../../src/core/pubsub-core.js';
import { openCore } from '../helpers/core.js';
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

const texts = (ms: ReceivedMessage[]) => ms.map((m) => m.message.data.toString());
const idOf = (ms: ReceivedMessage[], data: string) => ms.find((m) => m.message.data.toString() === data)!.ackId;
async function publish(...items: [key: string, data: string][]): Promise<void> {
  for (const [orderingKey, data] of items) await core.publish('orders', [{ data, orderingKey }]);
}
const pull = (sub: string) => core.pull(sub, { maxMessages: 100 });
/** The InvalidAckIdsError a call failed with. */
async function invalid(call: Promise<unknown>): Promise<InvalidAckIdsError> {
  const e = await call.then(
    () => undefined,
    (error: unknown) => error,
  );
  expect(e).toBeInstanceOf(InvalidAckIdsError);
  return e as InvalidAckIdsError;
}

describe('exactly-once delivery', () => {
  beforeEach(async () => {
    await core.createSubscription('once', { topic: 'orders', enableExactlyOnceDelivery: true, ackDeadlineSeconds: 10 });
  });

  it('an ack of an expired or unknown ack id fails with PERMANENT_FAILURE_INVALID_ACK_ID; the valid ids of the request are acked', async () => {
    await publish(['', 'm1'], ['', 'm2']);
    clock.advance(50); // deadlines fall between two ticks (every 100 ms)
    const first = await pull('once');
    clock.advance(5_000);
    await core.modifyAckDeadline('once', [idOf(first, 'm2')], 60); // m2's lease runs on
    clock.advance(5_000); // m1's lease has just ended, and no tick has ended it yet: the ack itself must see that
    const e = await invalid(core.acknowledge('once', [idOf(first, 'm1'), idOf(first, 'm2'), 'no-such-id']));
    expect(e.code).toBe('INVALID_ARGUMENT');
    expect(e.invalidAckIds).toEqual([idOf(first, 'm1'), 'no-such-id']);
    expect(e.errorInfo).toEqual({
      reason: 'EXACTLY_ONCE_ACKID_FAILURE',
      domain: 'pubsub.googleapis.com',
      metadata: { [idOf(first, 'm1')]: 'PERMANENT_FAILURE_INVALID_ACK_ID', 'no-such-id': 'PERMANENT_FAILURE_INVALID_ACK_ID' },
    });
    // m2 was acked; m1 comes again (its expiry counted), under a new ack id that works
    const again = await pull('once');
    expect(texts(again)).toEqual(['m1']);
    expect(await core.acknowledge('once', [again[0]!.ackId])).toEqual({ ackIds: [again[0]!.ackId], invalidAckIds: [] });
    expect(await pull('once')).toEqual([]);
    // the old id stays invalid, also for modacks and nacks
    await invalid(core.modifyAckDeadline('once', [idOf(first, 'm1')], 30));
    await invalid(core.modifyAckDeadline('once', [idOf(first, 'm1')], 0));
  });

  it('an id repeated in one request counts once: a valid one acked (not invalid at its repeat), an invalid one reported once', async () => {
    await publish(['', 'm1'], ['', 'm2']);
    const batch = await pull('once');
    const [m1, m2] = [idOf(batch, 'm1'), idOf(batch, 'm2')];
    const e = await invalid(core.acknowledge('once', [m1, m1, 'no-such-id', m2, 'no-such-id', m1, m2]));
    expect(e.invalidAckIds).toEqual(['no-such-id']);
    expect(await pull('once')).toEqual([]);
    expect((await invalid(core.acknowledge('once', [m1, m1]))).invalidAckIds).toEqual([m1]);
  });

  it("an id like a live one in its counter (another subscription's, or this one's with another seq or prefix) is refused and acks nothing", async () => {
    await core.createSubscription('once-too', { topic: 'orders', enableExactlyOnceDelivery: true, ackDeadlineSeconds: 10 });
    await publish(['', 'm1']);
    const [mine] = await pull('once');
    const [theirs] = await pull('once-too');
    const [prefix, seq, counter] = mine!.ackId.split('-');
    expect(theirs!.ackId.endsWith(`-${counter}`)).toBe(true); // each subscription counts its leases from 1
    const lookalikes = [theirs!.ackId, `${prefix}-${Number(seq) + 1}-${counter}`, `x${mine!.ackId}`, `${prefix}-${seq}-0${counter}`];
    expect((await invalid(core.acknowledge('once', lookalikes))).invalidAckIds).toEqual(lookalikes);
    await invalid(core.modifyAckDeadline('once', lookalikes, 0));
    expect(await core.acknowledge('once', [mine!.ackId])).toEqual({ ackIds: [mine!.ackId], invalidAckIds: [] });
    expect(await core.acknowledge('once-too', [theirs!.ackId])).toEqual({ ackIds: [theirs!.ackId], invalidAckIds: [] });
  });

  it('a message is not delivered again while its lease is valid (extended by modacks)', async () => {
    await publish(['', 'm1']);
    const [m1] = await pull('once');
    for (let i = 0; i < 5; i++) {
      clock.advance(9_000);
      expect(await core.modifyAckDeadline('once', [m1!.ackId], 10)).toEqual({ ackIds: [m1!.ackId], invalidAckIds: [] });
      expect(await pull('once')).toEqual([]);
    }
    await core.acknowledge('once', [m1!.ackId]);
    clock.advance(60_000);
    expect(await pull('once')).toEqual([]);
  });

  it('ordered: a confirmed ack is final — a nack of an earlier message redelivers the key without the acked ones; their revoked ids fail', async () => {
    await core.createSubscription('once-ordered', { topic: 'orders', enableExactlyOnceDelivery: true, enableMessageOrdering: true });
    await publish(['k', 'k1'], ['k', 'k2'], ['k', 'k3'], ['k', 'k4']);
    const batch = await pull('once-ordered');
    expect(texts(batch)).toEqual(['k1', 'k2', 'k3', 'k4']);
    await core.acknowledge('once-ordered', [idOf(batch, 'k2')]);
    // nacking k1 and k3 together: k3's nack stands although k1's nack revoked its lease first
    expect(await core.modifyAckDeadline('once-ordered', [idOf(batch, 'k1'), idOf(batch, 'k3')], 0)).toEqual({
      ackIds: [idOf(batch, 'k1'), idOf(batch, 'k3')],
      invalidAckIds: [],
    });
    // k4 was revoked by the redelivery of k1: its ack fails, so the client knows it comes again
    expect((await invalid(core.acknowledge('once-ordered', [idOf(batch, 'k4')]))).invalidAckIds).toEqual([idOf(batch, 'k4')]);
    clock.advance(1);
    const again = await pull('once-ordered');
    expect(texts(again)).toEqual(['k1', 'k3', 'k4']);
    await core.acknowledge('once-ordered', [idOf(again, 'k3')]);
    await core.close();
    // after a restart the key resumes at k1 without the acked k2 and k3 (an ordinary ordered subscription redelivers them)
    ({ core } = await openCore(dir.path, clock));
    expect(texts(await pull('once-ordered'))).toEqual(['k1', 'k4']);
  });

  it('an ack sent while a seek back is under way fails and does not undo the replay (an ordinary subscription ignores it)', async () => {
    await core.createSubscription('plain', { topic: 'orders' });
    const before = clock.now();
    clock.advance(1_000);
    await publish(['', 'm1']);
    for (const sub of ['once', 'plain']) {
      const [m1] = await pull(sub);
      // The ack comes after the seek began, before it is done: its write would have landed after the seek's
      // and acked m1 for good (on 'once' reported as acked), so the seek's replay lost it.
      const seek = core.seek(sub, before);
      const ack = core.acknowledge(sub, [m1!.ackId]);
      // Its outcome is taken at once: the seek runs on the store's writer thread, and a rejection left
      // unobserved while it does is an unhandled one.
      const outcome = sub === 'once' ? invalid(ack).then((e) => ({ ackIds: [], invalidAckIds: e.invalidAckIds })) : ack;
      await seek;
      expect(await outcome).toEqual({ ackIds: [], invalidAckIds: [m1!.ackId] });
      const replayed = await pull(sub);
      expect(texts(replayed)).toEqual(['m1']);
      await core.acknowledge(sub, [replayed[0]!.ackId]);
    }
    // the replayed m1's ack is what holds, after a restart too
    await core.close();
    ({ core } = await openCore(dir.path, clock));
    expect(await pull('once')).toEqual([]);
    expect(await pull('plain')).toEqual([]);
  });

  it('enableExactlyOnceDelivery can be turned on and off; without it stale ids are ignored as before', async () => {
    await core.createSubscription('plain', { topic: 'orders' });
    await publish(['', 'm1']);
    const [m1] = await pull('plain');
    expect(await core.acknowledge('plain', [m1!.ackId, 'junk'])).toEqual({ ackIds: [m1!.ackId], invalidAckIds: ['junk'] });
    expect(await core.modifyAckDeadline('plain', ['junk'], 0)).toEqual({ ackIds: [], invalidAckIds: ['junk'] });
    await core.updateSubscription('plain', { enableExactlyOnceDelivery: true });
    expect(core.getSubscription('plain').enableExactlyOnceDelivery).toBe(true);
    await invalid(core.acknowledge('plain', ['junk']));
    await core.updateSubscription('plain', { enableExactlyOnceDelivery: false });
    await core.acknowledge('plain', ['junk']);
  });

  it('is for pull subscriptions only, as in Pub/Sub: refused beside push or export delivery at create and update', async () => {
    const push = { pushEndpoint: 'http://127.0.0.1:9/push' };
    const refusal = 'enableExactlyOnceDelivery: exactly-once delivery is supported on pull subscriptions only, not with';
    await expect(
      core.createSubscription('eod-push', { topic: 'orders', enableExactlyOnceDelivery: true, pushConfig: push }),
    ).rejects.toThrow(`${refusal} pushConfig`);
    expect(core.hasSubscription('eod-push')).toBe(false);
    await core.createSubscription('eod-pull', { topic: 'orders', enableExactlyOnceDelivery: true });
    await expect(core.updateSubscription('eod-pull', { pushConfig: push })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await core.createSubscription('pushes', { topic: 'orders', pushConfig: push });
    await expect(core.updateSubscription('pushes', { enableExactlyOnceDelivery: true })).rejects.toThrow(`${refusal} pushConfig`);
    expect(core.getSubscription('eod-pull').pushConfig).toBeUndefined();
    expect(core.getSubscription('pushes').enableExactlyOnceDelivery).toBe(false);
    // Both in one update: push on, exactly-once off.
    await core.updateSubscription('eod-pull', { pushConfig: push, enableExactlyOnceDelivery: false });
    expect(core.getSubscription('eod-pull').pushConfig?.pushEndpoint).toBe(push.pushEndpoint);
  });
});
