import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { Backoff } from '../../src/connector/backoff.js';
import { emptyResult, SinkBusyError, type WriteResult } from '../../src/connector/connector.js';
import { ExportManager } from '../../src/connector/export-manager.js';
import { registerConnector } from '../../src/connector/registry.js';
import { PubSubCore } from '../../src/core/pubsub-core.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { tempDir } from '../helpers/core.js';
import { waitFor } from '../helpers/export.js';
import { capturedLogger, type LogLine } from '../helpers/log-lines.js';

/** Opens of the sink so far: the first three find it held by another process (a DuckDB file open elsewhere). */
let opens = 0;
registerConnector<Record<string, never>>({
  name: 'held-for-a-while',
  parseConfig: () => ({}),
  create: () => ({
    open: async () => {
      if (++opens <= 3) throw new SinkBusyError('standby: the sink is open in another process (pid 1)');
    },
    write: async (messages): Promise<WriteResult> => ({ ...emptyResult(), written: messages.map((m) => m.id) }),
    flush: async () => emptyResult(),
    close: async () => {},
  }),
});

let dir: ReturnType<typeof tempDir>;
let core: PubSubCore;
let exports: ExportManager;
let lines: LogLine[];
beforeEach(async () => {
  dir = tempDir();
  core = await PubSubCore.open({ store: SqliteStore.open(join(dir.path, 'store'), { durability: 'process' }), projectId: 'p', tickMs: 20 });
  const captured = capturedLogger();
  lines = captured.lines;
  exports = new ExportManager({
    core,
    settings: { dataDir: dir.path },
    logger: captured.logger,
    runner: { flushIntervalMs: 100, backoff: () => new Backoff(20, 200), standbyRetryMs: 20 },
  });
  await exports.start();
  await core.createTopic('events');
});
afterEach(async () => {
  await exports.stop();
  await core.close();
  dir.remove();
});

it('a standby that takes its sink over says so in the log (it logged only the wait, read as waiting still)', async () => {
  await core.createSubscription('held', {
    topic: 'events',
    enableMessageOrdering: true,
    exportConfig: { connector: 'held-for-a-while' },
  });
  await exports.sync();
  await core.publish('events', [{ data: 'a', orderingKey: 'k' }]);
  await waitFor('written once the sink is free', () => exports.runner('held')?.stats.written === 1);
  const subscription = 'projects/p/subscriptions/held';
  expect(lines.filter((l) => l.subscription === subscription).map((l) => l.msg)).toEqual([
    'export waiting as a standby',
    'export took its sink over; no longer a standby',
  ]);
});
