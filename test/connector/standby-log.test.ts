import { afterEach, beforeEach, expect, it } from 'vitest';
import { emptyResult, SinkBusyError, type WriteResult } from '../../src/connector/connector.js';
import { registerConnector } from '../../src/connector/registry.js';
import { waitFor } from '../helpers/wait-for.js';
import { openLoggedExports, type LoggedExports } from '../helpers/log-lines.js';

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

let env: LoggedExports;
beforeEach(async () => {
  env = await openLoggedExports({ flushIntervalMs: 100, standbyRetryMs: 20 });
});
afterEach(() => env.close());

it('a standby that takes its sink over says so in the log (it logged only the wait, read as waiting still)', async () => {
  const { core, exports, lines } = env;
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
