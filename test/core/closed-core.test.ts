import { afterEach, expect, it } from 'vitest';
import type { OrderlyError } from '../../src/core/errors.js';
import { openCore } from '../helpers/core.js';
import { tempDir } from '../helpers/temp-dir.js';

let dir: ReturnType<typeof tempDir>;
afterEach(() => dir.remove());

const CLOSED = { code: 'FAILED_PRECONDITION', message: 'the Orderly core is closed' };

it('every use of a closed core fails with FAILED_PRECONDITION saying so, and a second close resolves', async () => {
  dir = tempDir();
  const { core } = await openCore(dir.path);
  await core.createTopic('orders');
  await core.createSubscription('orders-sub', { topic: 'orders', enableMessageOrdering: true });
  await core.publish('orders', [{ data: 'a', orderingKey: 'k' }]);
  const [pulled] = await core.pull('orders-sub');
  let told: OrderlyError | undefined;
  core.attach('orders-sub', { room: () => ({ messages: 0, bytes: 0 }), deliver: () => undefined, detached: (reason) => (told = reason) });
  await core.close();
  await core.close();

  // An attached consumer is told the core closed, not that its subscription is gone.
  expect(told).toMatchObject(CLOSED);
  const uses: [string, () => unknown][] = [
    ['publish', () => core.publish('orders', [{ data: 'b' }])],
    ['pull', () => core.pull('orders-sub')],
    ['acknowledge', () => core.acknowledge('orders-sub', [pulled!.ackId])],
    ['modifyAckDeadline', () => core.modifyAckDeadline('orders-sub', [pulled!.ackId], 0)],
    ['subscribe', () => core.subscribe('orders-sub', () => undefined)],
    ['seek', () => core.seek('orders-sub', 0)],
    ['createSnapshot', () => core.createSnapshot('snap', { subscription: 'orders-sub' })],
    ['createTopic', () => core.createTopic('other')],
    ['updateTopic', () => core.updateTopic('orders', { labels: { a: 'b' } })],
    ['createSubscription', () => core.createSubscription('other-sub', { topic: 'orders' })],
    ['updateSubscription', () => core.updateSubscription('orders-sub', { ackDeadlineSeconds: 20 })],
    ['deleteSubscription', () => core.deleteSubscription('orders-sub')],
    ['compact', () => core.compact()],
  ];
  for (const [use, call] of uses) {
    const outcome = await (async () => call())().then(
      () => 'resolved',
      (e: unknown) => e,
    );
    expect(outcome, use).toMatchObject(CLOSED);
  }
});
