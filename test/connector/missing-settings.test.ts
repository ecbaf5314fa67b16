import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import '../../examples/jsonl-file-connector/src/index.js';
import { tempDir } from '../helpers/temp-dir.js';
import { openExport } from '../helpers/export.js';
import { waitFor } from '../helpers/wait-for.js';

let dir: ReturnType<typeof tempDir>;
afterEach(() => dir.remove());

describe('an export whose connector needs settings this process lacks (bigqueryConfig on a server without DuckDB)', () => {
  it('is refused when created or updated; one stored before shows why it cannot run and holds up no other export', async () => {
    dir = tempDir();
    // Stored by a process with a DuckDB database...
    const withDuckDb = await openExport(dir.path);
    await withDuckDb.core.createTopic('events');
    await withDuckDb.core.createSubscription('to-table', { topic: 'events', bigqueryConfig: { table: 'p.main.t' } });
    await withDuckDb.close();

    // ...then served without one (`orderly serve` with no job file): it starts, and says why that export cannot run.
    const env = await openExport(dir.path, { duckdbPath: undefined });
    try {
      await waitFor('the state', () => env.core.getSubscription('to-table').state === 'RESOURCE_ERROR');
      expect(env.exports.runner('to-table')!.stats.stateReason).toContain('bigqueryConfig subscriptions need a DuckDB database file');

      const refusal = 'duckdb: bigqueryConfig subscriptions need a DuckDB database file';
      await expect(
        env.core.createSubscription('to-table-2', { topic: 'events', bigqueryConfig: { table: 'p.main.t' } }),
      ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringContaining(refusal) });
      await env.core.createSubscription('plain', { topic: 'events' });
      await expect(env.core.updateSubscription('plain', { bigqueryConfig: { table: 'p.main.t' } })).rejects.toThrow(refusal);
      expect(env.core.hasSubscription('to-table-2')).toBe(false);

      // Exports this process can run are created, started and exporting.
      const path = join(dir.path, 'out.jsonl');
      await env.core.createSubscription('to-file', { topic: 'events', exportConfig: { connector: 'jsonl-file', path } });
      await env.exports.sync();
      await env.core.publish('events', [{ data: 'a' }, { data: 'b' }]);
      await waitFor('the file export', () => env.core.metrics('to-file').backlogMessages === 0);
      expect(readFileSync(path, 'utf8').trim().split('\n')).toHaveLength(2);
    } finally {
      await env.close();
    }
  });
});
