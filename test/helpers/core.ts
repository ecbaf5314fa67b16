import { ManualClock } from '../../src/core/clock.js';
import { PubSubCore, type CoreOptions } from '../../src/core/pubsub-core.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';

/** A core on a real SQLite store in `dir`, driven by a manual clock; `options` as the core takes them (memory, timers). */
export async function openCore(
  dir: string,
  clock = new ManualClock(),
  options: Omit<CoreOptions, 'store' | 'clock' | 'projectId'> = {},
): Promise<{ core: PubSubCore; clock: ManualClock }> {
  const core = await PubSubCore.open({ store: SqliteStore.open(dir, { durability: 'process' }), clock, projectId: 'p', ...options });
  return { core, clock };
}

/**
 * Lets queued work finish: store writes commit (on the writer thread), then what their commits set off
 * (a dead-letter publish, then its ack) runs; three rounds cover the longest such chain.
 */
export async function settle(core: PubSubCore): Promise<void> {
  for (let i = 0; i < 3; i++) {
    await core.flushed();
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** One pull of up to 100 messages, acked at once: their data as text. */
export async function pullAndAck(core: PubSubCore, sub: string): Promise<string[]> {
  const got = await core.pull(sub, { maxMessages: 100 });
  await core.acknowledge(
    sub,
    got.map((m) => m.ackId),
  );
  return got.map((m) => m.message.data.toString());
}
