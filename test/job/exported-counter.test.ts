import { afterEach, expect, it } from 'vitest';
import { queryDuckDb } from '../../src/duckdb/database.js';
import { serveMetrics, statusOf } from '../../src/job/metrics.js';
import { tempDir } from '../helpers/temp-dir.js';
import { openExport } from '../helpers/export.js';
import { waitFor } from '../helpers/wait-for.js';

const cleanups: (() => void | Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

it('counts in exported each message settled at the sink, a replayed one it already held included, and says so', async () => {
  const dir = tempDir('orderly-exported-counter-');
  cleanups.push(() => dir.remove());
  const env = await openExport(dir.path);
  cleanups.push(() => env.close());
  const metrics = await serveMetrics(env.core, env.exports, '127.0.0.1', 0);
  cleanups.push(() => metrics.close());
  await queryDuckDb(env.duckdbPath, 'CREATE TABLE events(data VARCHAR)');
  await env.core.createTopic('events');
  await env.core.createSubscription('to-table', {
    topic: 'events',
    enableMessageOrdering: true,
    retainAckedMessages: true,
    bigqueryConfig: { table: 'p.main.events' },
  });
  await env.exports.sync();
  const before = Date.now() - 1000;
  await env.core.publish(
    'events',
    [1, 2, 3].map((n) => ({ data: `m${n}`, orderingKey: 'k' })),
  );
  const row = () => statusOf(env.core, env.exports)[0]!;
  await waitFor('the first export', () => row().exported === 3);

  // Replayed: acked again without a second row (docs/connectors.md), and counted again in exported.
  await env.core.seek('to-table', before);
  await waitFor('the replay settled', () => row().exported === 6 && row().backlog === 0);
  expect(row().exportCounters).toEqual({ rowsAppended: 3, changesApplied: 0 });
  expect(await queryDuckDb(env.duckdbPath, 'SELECT count(*)::INTEGER n FROM events')).toEqual([{ n: 3 }]);
  const text = await (await fetch(`${metrics.url}/metrics`)).text();
  expect(text).toContain('orderly_exported_total{subscription="to-table"} 6');
  expect(text).toContain('orderly_rows_appended_total{subscription="to-table"} 3');
  // Before, the help said "Messages written by the export connector": 6 of them, for 3 rows.
  expect(text).toMatch(/^# HELP orderly_exported_total .*already held.*\(rows_appended, objects_written\).*$/m);
});
