import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import type { ReceivedMessage } from '../../src/core/message.js';
import { PubSubCore } from '../../src/core/pubsub-core.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { settle } from '../helpers/core.js';
import { tempDir } from '../helpers/temp-dir.js';

const BUDGET = 4096;
const KEYS = ['a', 'b', 'c', 'd'];
const body = (key: string, i: number) => `${key}${i}:`.padEnd(1000, key);

let dir: ReturnType<typeof tempDir>;
let clock: ManualClock;
let core: PubSubCore;

const open = () =>
  PubSubCore.open({
    store: SqliteStore.open(dir.path, { durability: 'process' }),
    clock,
    projectId: 'p',
    memory: { payloadBytes: BUDGET },
  });

async function pullAll(sub: string): Promise<ReceivedMessage[]> {
  const all: ReceivedMessage[] = [];
  for (;;) {
    const batch = await core.pull(sub, { maxMessages: 1000 });
    if (!batch.length) return all;
    all.push(...batch);
  }
}

const text = (m: ReceivedMessage) => m.message.data.toString();

beforeEach(async () => {
  dir = tempDir();
  clock = new ManualClock();
  core = await open();
  await core.createTopic('events');
  await core.createTopic('dead');
  await core.createSubscription('dead-sub', { topic: 'dead' });
  await core.createSubscription('sub', {
    topic: 'events',
    enableMessageOrdering: true,
    deadLetterPolicy: { deadLetterTopic: 'dead', maxDeliveryAttempts: 5 },
  });
  for (let i = 1; i <= 10; i++)
    await core.publish(
      'events',
      KEYS.map((k) => ({ data: body(k, i), orderingKey: k })),
    );
});
afterEach(async () => {
  await core.close();
  dir.remove();
});

describe('a backlog larger than the payload budget', () => {
  it('keeps at most the budget in memory and delivers every payload, per key in order', async () => {
    const metrics = core.metrics('sub');
    expect(metrics.residentBytes).toBeLessThanOrEqual(BUDGET);
    expect(metrics.backlogBytes).toBeGreaterThanOrEqual(40 * 1000); // full sizes, spilled or not
    const got = await pullAll('sub');
    for (const k of KEYS)
      expect(got.filter((m) => m.message.orderingKey === k).map(text)).toEqual(Array.from({ length: 10 }, (_, i) => body(k, i + 1)));
  });

  it('redelivers a nacked key from the store, and reads the backlog back the same way after a restart', async () => {
    const first = await pullAll('sub');
    const a3 = first.find((m) => text(m) === body('a', 3))!;
    await core.modifyAckDeadline('sub', [a3.ackId], 0);
    await core.acknowledge(
      'sub',
      first.filter((m) => m.message.orderingKey !== 'a' || Number(text(m).split(':')[0]!.slice(1)) < 3).map((m) => m.ackId),
    );
    clock.advance(60_000); // past the retry backoff
    const again = await pullAll('sub');
    expect(again.map(text)).toEqual(Array.from({ length: 8 }, (_, i) => body('a', i + 3)));
    await settle(core);
    await core.close();
    core = await open();
    expect(core.metrics('sub').residentBytes).toBeLessThanOrEqual(BUDGET);
    expect((await pullAll('sub')).map(text)).toEqual(Array.from({ length: 8 }, (_, i) => body('a', i + 3)));
  });

  it('forwards a spilled message to the dead-letter topic with its payload', async () => {
    for (let attempt = 1; attempt <= 5; attempt++) {
      const d10 = (await pullAll('sub')).find((m) => text(m) === body('d', 10))!;
      await core.modifyAckDeadline('sub', [d10.ackId], 0);
      clock.advance(600_000);
    }
    await settle(core);
    const [dead] = await pullAll('dead-sub');
    expect(text(dead!)).toBe(body('d', 10));
    expect(dead!.message.attributes.CloudPubSubDeadLetterSourceDeliveryCount).toBe('5');
  });
});
