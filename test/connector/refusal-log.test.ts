import { afterEach, beforeEach, expect, it } from 'vitest';
import { emptyResult, type ConnectorContext, type WriteResult } from '../../src/connector/connector.js';
import { registerConnector } from '../../src/connector/registry.js';
import { waitFor } from '../helpers/wait-for.js';
import { openLoggedExports, type LoggedExports } from '../helpers/log-lines.js';

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

let env: LoggedExports;
beforeEach(async () => {
  env = await openLoggedExports({ flushIntervalMs: 100 });
});
afterEach(() => env.close());

it('a sink that refuses deliveries as retryable says so in the log, not only in status (it was silent however long it lasted)', async () => {
  const { core, exports, lines } = env;
  await core.createSubscription('refused', {
    topic: 'events',
    enableMessageOrdering: true,
    retryPolicy: { minimumBackoff: '0s', maximumBackoff: '0s' },
    exportConfig: { connector: 'refusing-for-a-while' },
  });
  await exports.sync();
  const [messageId] = await core.publish('events', [{ data: 'a', orderingKey: 'k' }]);
  await waitFor('written at last', () => exports.runner('refused')?.stats.written === 1, 30_000);
  expect(exports.runner('refused')!.stats.failed).toBe(3);
  // Throttled: one line per 10 s, with the sink's own words.
  expect(lines.filter((l) => l.level === 40)).toEqual([
    expect.objectContaining({
      subscription: 'projects/p/subscriptions/refused',
      example: 'upload to bucket b refused: HTTP 404',
      // Which message: only the dead-letter topic had said.
      exampleMessageId: messageId,
      msg: 'messages could not be written; nacked and delivered again after the retry backoff',
    }),
  ]);
});
