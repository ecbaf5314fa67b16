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
