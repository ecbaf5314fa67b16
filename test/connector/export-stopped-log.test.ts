import { afterEach, beforeEach, expect, it } from 'vitest';
import { emptyResult, type WriteResult } from '../../src/connector/connector.js';
import { registerConnector } from '../../src/connector/registry.js';
import { waitFor } from '../helpers/wait-for.js';
import { openLoggedExports, type LoggedExports } from '../helpers/log-lines.js';

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

let env: LoggedExports;
beforeEach(async () => {
  env = await openLoggedExports({ flushIntervalMs: 50 });
});
afterEach(() => env.close());

it('an export whose subscription is deleted while it runs says in the log that it stopped (its series only left /metrics)', async () => {
  const { core, exports, lines } = env;
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
