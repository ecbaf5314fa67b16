import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import type { ReceivedMessage } from '../../src/core/message.js';
import { openCore } from '../helpers/core.js';
import { tempDir } from '../helpers/temp-dir.js';

type Op =
  | { kind: 'publish'; keys: number[] }
  | { kind: 'pull'; max: number }
  | { kind: 'ack'; pick: number[] }
  | { kind: 'nack'; pick: number }
  | { kind: 'expire' }
  | { kind: 'compact' }
  | { kind: 'restart' };

const KEYS = ['k0', 'k1', 'k2', ''];
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('publish' as const), keys: fc.array(fc.nat(KEYS.length - 1), { minLength: 1, maxLength: 5 }) }),
  fc.record({ kind: fc.constant('pull' as const), max: fc.integer({ min: 1, max: 6 }) }),
  fc.record({ kind: fc.constant('ack' as const), pick: fc.array(fc.nat(50), { maxLength: 4 }) }),
  fc.record({ kind: fc.constant('nack' as const), pick: fc.nat(50) }),
  fc.constant({ kind: 'expire' as const }),
  fc.constant({ kind: 'compact' as const }),
  fc.constant({ kind: 'restart' as const }),
);

/**
 * Invariants, per ordered subscription and key, checked on every pull:
 * - a key's messages in one response are consecutive in publish order;
 * - a batch of key K starting at message s comes only when every earlier message of K has been acked
 *   (so a redelivery restarts at the first unacked message and nothing is skipped);
 * - nothing is delivered that was not published; after draining, every published message was acked.
 */
describe.each([
  ['the default memory window', undefined],
  // A window of 6 messages, 2 per key and 10 payload bytes: most of the backlog is read lazily from the
  // store, keys overflow and are read back per key, payloads are read back when delivered.
  ['a tiny memory window', { messagesPerSubscription: 6, messagesPerKey: 2, payloadBytes: 10 }],
] as const)('ordered delivery under random acks, nacks, expiries, compactions and restarts (fast-check), with %s', (_, memory) => {
  it('keeps per-key order and loses nothing', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 5, maxLength: 60 }), async (ops) => {
        const dir = tempDir();
        const clock = new ManualClock();
        let { core } = await openCore(dir.path, clock, { memory });
        await core.createTopic('t-prop');
        await core.createSubscription('ordered', { topic: 't-prop', enableMessageOrdering: true });
        await core.createSubscription('unordered', { topic: 't-prop' });
        const published = new Map<string, { key: string; seq: number }>();
        const ackedOrdered = new Set<string>();
        const ackedUnordered = new Set<string>();
        let outstanding: ReceivedMessage[] = [];
        const check = (batch: ReceivedMessage[]) => {
          const byKey = new Map<string, ReceivedMessage[]>();
          for (const m of batch) {
            const p = published.get(m.message.messageId);
            expect(p, `delivered ${m.message.messageId} was never published`).toBeDefined();
            expect(p!.seq).toBe(m.message.sequence);
            if (m.message.orderingKey === '') continue;
            byKey.set(m.message.orderingKey, [...(byKey.get(m.message.orderingKey) ?? []), m]);
          }
          for (const [key, ms] of byKey) {
            ms.forEach((m, i) => i > 0 && expect(m.message.sequence).toBe(ms[i - 1]!.message.sequence + 1));
            const first = ms[0]!.message.sequence;
            for (const [id, p] of published) {
              if (p.key === key && p.seq < first)
                expect(ackedOrdered.has(id), `key ${key}: ${first} delivered before ${p.seq} was acked`).toBe(true);
            }
          }
        };
        const pullOrdered = async (max: number) => {
          const batch = await core.pull('ordered', { maxMessages: max });
          check(batch);
          outstanding.push(...batch);
        };
        const drainUnordered = async () => {
          for (let round = 0; round < 200 && core.metrics('unordered').backlogMessages > 0; round++) {
            clock.advance(11_000);
            const batch = await core.pull('unordered', { maxMessages: 100 });
            await core.acknowledge(
              'unordered',
              batch.map((m) => m.ackId),
            );
            batch.forEach((m) => ackedUnordered.add(m.message.messageId));
            await new Promise((resolve) => setImmediate(resolve));
          }
        };
        try {
          for (const o of ops) {
            if (o.kind === 'publish') {
              const ids = await core.publish(
                't-prop',
                o.keys.map((k, i) => ({ data: `d${i}`, orderingKey: KEYS[k] })),
              );
              const counts = new Map<string, number>();
              for (const p of published.values()) counts.set(p.key, Math.max(counts.get(p.key) ?? 0, p.seq));
              ids.forEach((id, i) => {
                const key = KEYS[o.keys[i]!]!;
                const seq = (counts.get(key) ?? 0) + 1;
                counts.set(key, seq);
                published.set(id, { key, seq });
              });
            } else if (o.kind === 'pull') {
              await pullOrdered(o.max);
            } else if (o.kind === 'ack' && outstanding.length) {
              const chosen = [...new Set(o.pick.map((i) => outstanding[i % outstanding.length]!))];
              const probe = core.attach('ordered', { room: () => ({ messages: 0, bytes: 0 }), deliver: () => undefined });
              const live = chosen.filter((m) => probe.isLive(m.ackId));
              probe.detach();
              await core.acknowledge(
                'ordered',
                chosen.map((m) => m.ackId),
              );
              live.forEach((m) => ackedOrdered.add(m.message.messageId));
              outstanding = outstanding.filter((m) => !chosen.includes(m));
            } else if (o.kind === 'nack' && outstanding.length) {
              const m = outstanding[o.pick % outstanding.length]!;
              await core.modifyAckDeadline('ordered', [m.ackId], 0);
              outstanding = outstanding.filter((x) => x !== m);
            } else if (o.kind === 'expire') {
              clock.advance(11_000);
              outstanding = [];
            } else if (o.kind === 'compact') {
              await core.compact();
            } else if (o.kind === 'restart') {
              await core.close();
              ({ core } = await openCore(dir.path, clock, { memory }));
              outstanding = [];
            }
          }
          // Drain: everything published is eventually delivered and acked.
          for (let round = 0; round < 200 && core.metrics('ordered').backlogMessages > 0; round++) {
            clock.advance(11_000); // whatever the ops left outstanding expires
            const batch = await core.pull('ordered', { maxMessages: 100 });
            check(batch);
            await core.acknowledge(
              'ordered',
              batch.map((m) => m.ackId),
            );
            batch.forEach((m) => ackedOrdered.add(m.message.messageId));
            await new Promise((resolve) => setImmediate(resolve)); // the window refills in the background
          }
          await drainUnordered();
          for (const id of published.keys()) {
            expect(ackedOrdered.has(id), `ordered subscription lost ${id}`).toBe(true);
            expect(ackedUnordered.has(id), `unordered subscription lost ${id}`).toBe(true);
          }
          expect(core.metrics('ordered').backlogMessages).toBe(0);
        } finally {
          await core.close();
          dir.remove();
        }
      }),
      { numRuns: Number(process.env.PROPERTY_RUNS ?? 30) },
    );
    // 30 runs of up to 60 operations with restarts, a new seed each time (PROPERTY_RUNS for more): 60 runs
    // of each of the two windows took 83–99 s of the suite's 10 minutes on the 2-core CI machine. A bound on
    // the work, not a timing assertion.
  }, 240_000);
});
