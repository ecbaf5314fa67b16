import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { emptyResult, type ExportMessage } from '../../src/connector/connector.js';
import { ExportManager } from '../../src/connector/export-manager.js';
import { registerConnector } from '../../src/connector/registry.js';
import { PubSubCore } from '../../src/core/pubsub-core.js';
import { createLogger } from '../../src/log.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { tempDir } from '../helpers/core.js';
import { waitFor } from '../helpers/export.js';

/**
 * The runner hands a large write result's acks to the core a slice per turn of the event loop. A result
 * bigger than one slice, reported by the final flush at stop (as a file connector finalizing its open file
 * does), is acked whole before the runner lets go of the subscription: nothing it wrote comes again.
 */
const written: string[] = [];

registerConnector<Record<string, never>>({
  name: 'flush-at-stop',
  parseConfig: () => ({}),
  create: () => {
    const buffered: ExportMessage[] = [];
    return {
      open: async () => {},
      write: async (messages) => {
        buffered.push(...messages);
        return emptyResult();
      },
      flush: async () => {
        const done = buffered.splice(0);
        written.push(...done.map((m) => m.message.data.toString()));
        return { ...emptyResult(), written: done.map((m) => m.id) };
      },
      close: async () => {},
    };
  },
});

const dir = tempDir('orderly-ack-slices-');
afterEach(() => dir.remove());

it('acks every message of a final flush larger than one ack slice before the export stops', async () => {
  const count = 5_500;
  const open = () => PubSubCore.open({ store: SqliteStore.open(join(dir.path, 'store')) });
  const core = await open();
  await core.createTopic('events');
  await core.createSubscription('exports', { topic: 'events', enableMessageOrdering: true, exportConfig: { connector: 'flush-at-stop' } });
  for (let b = 0; b < count; b += 500)
    await core.publish(
      'events',
      Array.from({ length: 500 }, (_, i) => ({ data: Buffer.from(String(b + i)), orderingKey: `k${(b + i) % 7}` })),
    );
  const exports = new ExportManager({ core, settings: { dataDir: dir.path }, logger: createLogger({ level: 'silent' }) });
  await exports.sync();
  const runner = exports.runner('exports')!;
  // Buffered by the connector and written by nothing yet: the final flush reports them all at once.
  await waitFor('every message delivered to the connector', () => runner.outstanding === count);
  await exports.stop();
  expect(written).toHaveLength(count);
  expect(runner.stats.written).toBe(count);
  await core.close();

  // Acked durably: a restarted core has none of them left in the backlog.
  const reopened = await open();
  try {
    expect(reopened.metrics('exports').backlogMessages).toBe(0);
  } finally {
    await reopened.close();
  }
});
