import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { Backoff } from '../../src/connector/backoff.js';
import { emptyResult, type WriteResult } from '../../src/connector/connector.js';
import { ExportManager } from '../../src/connector/export-manager.js';
import { registerConnector } from '../../src/connector/registry.js';
import { PubSubCore } from '../../src/core/pubsub-core.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { tempDir } from '../helpers/core.js';
import { waitFor } from '../helpers/export.js';
import { capturedLogger, type LogLine } from '../helpers/log-lines.js';

registerConnector<Record<string, never>>({
  name: 'writing-everything',
  parseConfig: () => ({}),
  create: () => ({
    open: async () => {},
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
    runner: { flushIntervalMs: 50, backoff: () => new Backoff(20, 200) },
  });
  await exports.start();
  await core.createTopic('events');
});
afterEach(async () => {
  await exports.stop();
  await core.close();
  dir.remove();
});

it('an export whose subscription is deleted while it runs says in the log that it stopped (its series only left /metrics)', async () => {
  await core.createSubscription('doomed', {
    topic: 'events',
    enableMessageOrdering: true,
    exportConfig: { connector: 'writing-everything' },
  });
  await exports.sync();
  await core.publish('events', [{ data: 'a', orderingKey: 'k' }]);
  await waitFor('written', () => exports.runner('doomed')?.stats.written === 1);
  await core.deleteSubscription('doomed');
  await exports.sync();
  const stopped = () => lines.find((l) => l.msg.startsWith('export stopped'));
  await waitFor('the log line', () => stopped() !== undefined);
  expect(stopped()).toMatchObject({
    subscription: 'projects/p/subscriptions/doomed',
    exported: 1,
    msg: 'export stopped: its subscription was deleted',
  });
});
