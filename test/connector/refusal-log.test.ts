import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { Backoff } from '../../src/connector/backoff.js';
import { emptyResult, type ConnectorContext, type WriteResult } from '../../src/connector/connector.js';
import { ExportManager } from '../../src/connector/export-manager.js';
import { registerConnector } from '../../src/connector/registry.js';
import { PubSubCore } from '../../src/core/pubsub-core.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { tempDir } from '../helpers/core.js';
import { waitFor } from '../helpers/export.js';

/** Writes per subscription, across the connectors the runner makes. */
const calls = new Map<string, number>();

/** A sink that refuses every delivery as retryable (an upload the bucket turns down) for its first three writes. */
registerConnector<Record<string, never>>({
  name: 'refusing-for-a-while',
  parseConfig: () => ({}),
  create: (_config, context: ConnectorContext) => ({
    open: async () => {},
    write: async (messages): Promise<WriteResult> => {
      const call = (calls.get(context.subscription) ?? 0) + 1;
      calls.set(context.subscription, call);
      if (call > 3) return { ...emptyResult(), written: messages.map((m) => m.id) };
      return {
        ...emptyResult(),
        failed: messages.map((m) => ({ id: m.id, error: 'upload to bucket b refused: HTTP 404', retryable: true })),
      };
    },
    flush: async () => emptyResult(),
    close: async () => {},
  }),
});

let dir: ReturnType<typeof tempDir>;
let core: PubSubCore;
let exports: ExportManager;
const lines: { level: number; msg: string; subscription?: string; example?: string }[] = [];
beforeEach(async () => {
  dir = tempDir();
  core = await PubSubCore.open({ store: SqliteStore.open(join(dir.path, 'store'), { durability: 'process' }), projectId: 'p', tickMs: 20 });
  const logged = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(JSON.parse(chunk.toString()) as (typeof lines)[number]);
      done();
    },
  });
  exports = new ExportManager({
    core,
    settings: { dataDir: dir.path },
    logger: pino({ level: 'info' }, logged),
    runner: { flushIntervalMs: 100, backoff: () => new Backoff(20, 200) },
  });
  await exports.start();
  await core.createTopic('events');
});
afterEach(async () => {
  await exports.stop();
  await core.close();
  dir.remove();
});

it('a sink that refuses deliveries as retryable says so in the log, not only in status (it was silent however long it lasted)', async () => {
  await core.createSubscription('refused', {
    topic: 'events',
    enableMessageOrdering: true,
    retryPolicy: { minimumBackoff: '0s', maximumBackoff: '0s' },
    exportConfig: { connector: 'refusing-for-a-while' },
  });
  await exports.sync();
  await core.publish('events', [{ data: 'a', orderingKey: 'k' }]);
  await waitFor('written at last', () => exports.runner('refused')?.stats.written === 1, 30_000);
  expect(exports.runner('refused')!.stats.failed).toBe(3);
  // Throttled: one line per 10 s, with the sink's own words.
  expect(lines.filter((l) => l.level === 40)).toEqual([
    expect.objectContaining({
      subscription: 'projects/p/subscriptions/refused',
      example: 'upload to bucket b refused: HTTP 404',
      msg: 'messages could not be written; nacked and delivered again after the retry backoff',
    }),
  ]);
});
