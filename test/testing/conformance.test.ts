import { join } from 'node:path';
import { describe, it } from 'vitest';
import { closeDuckDb, queryDuckDb } from '../../src/duckdb/database.js';
import { conformanceCases } from '../../src/testing/index.js';

// The built-in DuckDB table writer passes the suite third-party connectors run (examples/ runs it on one
// from outside, through the package).
describe('conformance suite: duckdb-table', () => {
  const database = (dir: string) => join(dir, 'sink.duckdb');
  /** Read back through this process's instance (the one the export writes through); closed after each case. */
  const opened = new Set<string>();
  const cases = conformanceCases({
    connector: 'duckdb-table',
    skipsDuplicates: true,
    settings: ({ dir }) => ({
      duckdb: {
        path: database(dir),
        init: [
          'CREATE TABLE IF NOT EXISTS events(subscription_name VARCHAR, message_id VARCHAR, publish_time TIMESTAMP, data VARCHAR, attributes JSON)',
        ],
      },
    }),
    config: () => ({ table: 'orderly-conformance.main.events', writeMetadata: true }),
    async readBack({ dir }) {
      opened.add(database(dir));
      const rows = await queryDuckDb(database(dir), 'SELECT message_id FROM events ORDER BY rowid');
      return rows.map((r) => String(r.message_id));
    },
  });
  for (const c of cases) {
    it(c.name, async () => {
      try {
        await c.run();
      } finally {
        for (const path of opened) await closeDuckDb(path);
        opened.clear();
      }
    });
  }
});
