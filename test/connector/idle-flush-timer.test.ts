import { expect, it } from 'vitest';
import { emptyResult, type ExportMessage } from '../../src/connector/connector.js';
import { ExportRunner } from '../../src/connector/export-runner.js';
import { EmbeddedSource } from '../../src/connector/sources/embedded-source.js';
import { PubSubCore } from '../../src/core/pubsub-core.js';
import { createLogger } from '../../src/log.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait-for.js';

/**
 * `idleFlushMs` finalizes what a connector holds that long after the last delivery, on a timer of its own:
 * checked only at the flush interval, it came up to a whole interval late (idleFlushSeconds 2 with the
 * default 1 s interval: 2-3 s, the tail of a fleet benchmark run). With a 10 s interval and 100 ms of
 * idleness, the flush comes ~0.1 s after the delivery with the timer and ~10 s after it without.
 */
it('an idle flush comes idleFlushMs after the last delivery, not at the next flush interval', async () => {
  const dir = tempDir();
  const core = await PubSubCore.open({ store: SqliteStore.open(dir.path) });
  let runner: ExportRunner | undefined;
  try {
    await core.createTopic('events');
    await core.createSubscription('idle', { topic: 'events', enableMessageOrdering: true });
    const held: ExportMessage[] = [];
    let deliveredAt = 0;
    let flushedAt = 0;
    runner = new ExportRunner({
      source: new EmbeddedSource(core, 'idle', core.identity('idle').uid, { maxPerKey: 1000 }),
      createConnector: () => ({
        open: async () => {},
        write: async (messages) => {
          deliveredAt = Date.now();
          held.push(...messages);
          return emptyResult();
        },
        // Only an idle flush finalizes (as a file connector's open file waits to fill).
        flush: async (mode) => {
          if (mode !== 'all' || !held.length) return emptyResult();
          flushedAt = Date.now();
          return { ...emptyResult(), written: held.splice(0).map((m) => m.id) };
        },
        close: async () => {},
      }),
      flushIntervalMs: 10_000,
      idleFlushMs: 100,
      logger: createLogger({ level: 'silent' }),
    });
    runner.start();
    await core.publish('events', [{ data: Buffer.from('a'), orderingKey: 'k' }]);
    await waitFor('the idle flush', () => flushedAt > 0, 5_000);
    // Not before the idleness (a few ms of slack: the runner counts from the delivery, just before write).
    expect(flushedAt - deliveredAt).toBeGreaterThanOrEqual(90);
    expect(flushedAt - deliveredAt).toBeLessThan(3_000);
  } finally {
    await runner?.stop();
    await core.close();
    dir.remove();
  }
});
