import { afterEach, beforeEach, expect, it } from 'vitest';
import { PubSubCore } from '../../src/core/pubsub-core.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait-for.js';

let dir: ReturnType<typeof tempDir>;
let core: PubSubCore;
beforeEach(async () => {
  dir = tempDir();
  core = await PubSubCore.open({
    store: SqliteStore.open(dir.path, { durability: 'process' }),
    projectId: 'p',
    memory: { messagesPerSubscription: 1_000, messagesPerKey: 100 },
  });
  await core.createTopic('events');
  for (const name of ['small', 'other']) await core.createSubscription(name, { topic: 'events', enableMessageOrdering: true });
});
afterEach(async () => {
  await core.close();
  dir.remove();
});

async function publish(messages: number): Promise<void> {
  for (let i = 0; i < messages; i += 500)
    await core.publish(
      'events',
      Array.from({ length: 500 }, (_, j) => ({ data: `m${i + j}`, orderingKey: `k${(i + j) % 50}` })),
    );
}

it("a consumer asking for a smaller window holds its subscription to it, the core's other subscriptions keep theirs, and its detach gives it back", async () => {
  // Takes nothing: what the subscription holds is what its window read ahead.
  const handle = core.attach('small', { windowMessages: 300, room: () => ({ messages: 0, bytes: 0 }), deliver: () => undefined });
  await publish(2_000);
  await waitFor('the other subscription to fill its window', () => core.metrics('other').heldMessages === 1_000);
  expect(core.metrics('other').windowMessages).toBe(1_000);
  expect(core.metrics('small')).toMatchObject({ windowMessages: 300, heldMessages: 300, backlogMessages: 2_000 });

  handle.detach();
  expect(core.metrics('small').windowMessages).toBe(1_000);
  await waitFor('the subscription to read up to the core window', () => core.metrics('small').heldMessages === 1_000);
});

it("never more than the core's window, whatever a consumer asks for; a key's share is at most the window", async () => {
  core.attach('small', { windowMessages: 5_000, room: () => ({ messages: 0, bytes: 0 }), deliver: () => undefined });
  await publish(2_000);
  expect(core.metrics('small')).toMatchObject({ windowMessages: 1_000, heldMessages: 1_000 });

  // One key of 200 messages under a window of 60 (below messagesPerKey, 100): the key takes the whole window.
  await core.createSubscription('narrow', { topic: 'events', enableMessageOrdering: true });
  core.attach('narrow', { windowMessages: 60, room: () => ({ messages: 0, bytes: 0 }), deliver: () => undefined });
  await core.publish(
    'events',
    Array.from({ length: 200 }, (_, i) => ({ data: `n${i}`, orderingKey: 'one' })),
  );
  expect(core.metrics('narrow')).toMatchObject({ windowMessages: 60, heldMessages: 60, backlogMessages: 200 });
});
