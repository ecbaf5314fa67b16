import { afterEach, describe, expect, it } from 'vitest';
import type { PubSubCore } from '../../src/core/pubsub-core.js';
import { openCore } from '../helpers/core.js';
import { tempDirPerTest } from '../helpers/temp-dir-per-test.js';

const dir = tempDirPerTest();
let core: PubSubCore | undefined;
afterEach(async () => {
  await core?.close();
  core = undefined;
});

describe('attributes of messages read back from the store', () => {
  // The store shares one frozen object among the messages it reads without attributes (the window keeps
  // thousands of them); what a consumer receives must still be its own, as a message published in this
  // process is (a handler that adds an attribute before forwarding the message, say).
  it('are an object of each delivery’s own, which a consumer may change without touching another', async () => {
    ({ core } = await openCore(dir.path));
    await core.createTopic('events');
    await core.createSubscription('sub', { topic: 'events', enableMessageOrdering: true });
    await core.publish('events', [
      { data: 'a', orderingKey: 'k' },
      { data: 'b', orderingKey: 'k' },
      { data: 'c', attributes: { kind: 'x' }, orderingKey: 'k' },
    ]);
    await core.close();
    ({ core } = await openCore(dir.path));

    const first = await core.pull('sub', { maxMessages: 10 });
    expect(first.map((r) => [r.message.data.toString(), r.message.attributes])).toEqual([
      ['a', {}],
      ['b', {}],
      ['c', { kind: 'x' }],
    ]);
    const [a, b] = first.map((r) => r.message);
    a!.attributes.forwarded = 'yes';
    expect(b!.attributes).toEqual({});
    expect(Object.isFrozen(b!.attributes)).toBe(false);
  });
});

describe('attributes of a delivered message', () => {
  // The stored message is one object for every subscription of its topic and for its redeliveries: an
  // attribute a handler of one subscription added reached the other's delivery and its own redelivery.
  it('are the delivery’s own: a change reaches neither another subscription nor a redelivery', async () => {
    ({ core } = await openCore(dir.path));
    await core.createTopic('events');
    await core.createSubscription('one', { topic: 'events' });
    await core.createSubscription('two', { topic: 'events' });
    await core.publish('events', [{ data: 'a', attributes: { kind: 'x' } }, { data: 'b' }]);
    const fromOne = await core.pull('one', { maxMessages: 10 });
    for (const r of fromOne) r.message.attributes.added = 'by one';
    await core.modifyAckDeadline(
      'one',
      fromOne.map((r) => r.ackId),
      0,
    );
    const fromTwo = await core.pull('two', { maxMessages: 10 });
    expect(fromTwo.map((r) => [r.message.data.toString(), r.message.attributes])).toEqual([
      ['a', { kind: 'x' }],
      ['b', {}],
    ]);
    const again = await core.pull('one', { maxMessages: 10 });
    expect(again.map((r) => [r.message.data.toString(), r.message.attributes])).toEqual([
      ['a', { kind: 'x' }],
      ['b', {}],
    ]);
  });
});
