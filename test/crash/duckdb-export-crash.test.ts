import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { closeDuckDb, queryDuckDb } from '../../src/duckdb/database.js';
import { tempDir } from '../helpers/temp-dir.js';
import { runExporterProcess } from '../helpers/exporter-process.js';
import { openExport } from '../helpers/export.js';

const worker = fileURLToPath(new URL('./duckdb-export-worker.ts', import.meta.url));
const MESSAGES = 100_000;
const KEYS = 1_000;

/** Runs the exporter; SIGKILLs it `killAfterMs` after it started, unless it finishes first. */
function runExporter(dir: string, killAfterMs?: number): Promise<'done' | 'killed'> {
  return runExporterProcess(worker, [dir], { killAfterMs });
}

describe('DuckDB export crash safety', () => {
  it('after SIGKILLs at random points the table holds every message exactly once, per key in order', async () => {
    const dir = tempDir('orderly-duck-crash-');
    try {
      const setup = await openExport(dir.path, {}, { start: false });
      await setup.core.createTopic('crash-topic');
      await setup.core.createSubscription('crash-sub', {
        topic: 'crash-topic',
        enableMessageOrdering: true,
        bigqueryConfig: { table: 'p.main.events', writeMetadata: true },
      });
      await queryDuckDb(
        setup.duckdbPath,
        `CREATE TABLE events(subscription_name VARCHAR, message_id VARCHAR, publish_time TIMESTAMP,
        data VARCHAR, attributes JSON, ordering_key VARCHAR, sequence BIGINT)`,
      );
      for (let i = 0; i < MESSAGES; i += 1000) {
        await setup.core.publish(
          'crash-topic',
          Array.from({ length: 1000 }, (_, j) => ({ data: `{"n":${i + j}}`, orderingKey: `key-${(i + j) % KEYS}` })),
        );
      }
      await setup.core.close();
      await closeDuckDb(setup.duckdbPath);

      let kills = 0;
      for (let round = 0; round < 8; round++) {
        // Within the first export's run: in one CI run (3.3 s for the whole test) it exported all 100,000
        // before a kill drawn up to 1.4 s after its start, as it was then, and nothing was killed.
        if ((await runExporter(dir.path, 100 + Math.floor(Math.random() * 500))) === 'done') break;
        kills++;
      }
      expect(await runExporter(dir.path)).toBe('done');
      expect(kills).toBeGreaterThan(0);

      const path = setup.duckdbPath;
      const [totals] = await queryDuckDb(
        path,
        'SELECT count(*) AS n, count(DISTINCT message_id) AS ids, count(DISTINCT ordering_key) AS keys FROM events',
        'other', // a query over 100,000 rows, not a table export's writes: more than the tables' 32 MiB
      );
      expect(totals).toEqual({ n: BigInt(MESSAGES), ids: BigInt(MESSAGES), keys: BigInt(KEYS) });
      // Per key, rows were appended (rowid order) in sequence order 1..100, and the payloads match.
      const badKeys = await queryDuckDb(
        path,
        `SELECT ordering_key FROM (
           SELECT ordering_key, list(sequence ORDER BY rowid) AS seqs, list((data->>'n')::INTEGER ORDER BY rowid) AS ns
           FROM events GROUP BY ordering_key)
         WHERE seqs <> range(1, ${MESSAGES / KEYS + 1})
            OR ns <> list_transform(range(0, ${MESSAGES / KEYS}), i -> i * ${KEYS} + split_part(ordering_key, '-', 2)::INTEGER)`,
        'other',
      );
      expect(badKeys).toEqual([]);
      await closeDuckDb(path);
    } finally {
      dir.remove();
    }
  }, 300_000);
});
