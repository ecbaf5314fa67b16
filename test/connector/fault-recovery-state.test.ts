import { afterEach, beforeEach, expect, it } from 'vitest';
import { emptyResult, type WriteResult } from '../../src/connector/connector.js';
import { registerConnector } from '../../src/connector/registry.js';
import { waitFor } from '../helpers/wait-for.js';
import { openLoggedExports, type LoggedExports } from '../helpers/log-lines.js';

/** Commits that failed so far: the first four fail, as a DuckDB commit does on a full disk. */
let failedCommits = 0;
/**
 * A sink that buffers what it is given and makes it durable when flushed (as the DuckDB table writer
 * appends and then commits): its writes go through while its commits fail.
 */
registerConnector<Record<string, never>>({
  name: 'commit-failing-for-a-while',
  parseConfig: () => ({}),
  create: () => {
    const buffered: string[] = [];
    return {
      open: async () => {},
      write: async (messages): Promise<WriteResult> => {
        buffered.push(...messages.map((m) => m.id));
        return emptyResult();
      },
      flush: async (): Promise<WriteResult> => {
        if (buffered.length && failedCommits < 4) {
          failedCommits++;
          throw new Error('Failed to commit: No space left on device');
        }
        return { ...emptyResult(), written: buffered.splice(0) };
      },
      close: async () => {},
    };
  },
});

let env: LoggedExports;
beforeEach(async () => {
  env = await openLoggedExports({ flushIntervalMs: 50 });
});
afterEach(() => env.close());

it('a sink whose writes go through while its commits fail stays RESOURCE_ERROR until one commits (state and log flapped at each retry)', async () => {
  const { core, exports, lines } = env;
  await core.createSubscription('full', {
    topic: 'events',
    enableMessageOrdering: true,
    exportConfig: { connector: 'commit-failing-for-a-while' },
  });
  await exports.sync();
  await core.publish('events', [{ data: 'a', orderingKey: 'k' }]);
  await waitFor('written once a commit works', () => exports.runner('full')?.stats.written === 1);
  expect(failedCommits).toBe(4);
  const states = lines.filter((l) => l.subscription === 'projects/p/subscriptions/full' && l.state !== undefined).map((l) => l.state);
  expect(states).toEqual(['RESOURCE_ERROR', 'ACTIVE']);
});
