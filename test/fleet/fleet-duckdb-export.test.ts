import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { closeDuckDb, queryDuckDb } from '../../src/duckdb/database.js';
import { OrderlyRunProcess } from '../faults/orderly-run-process.js';
import { tempDir } from '../helpers/core.js';
import { waitFor } from '../helpers/export.js';
import { publishKeyed, startRemote, workerStatus, writeRemoteJob } from '../helpers/fleet.js';

const MESSAGES = 4000;
const KEYS = 100;
const KILLS = 3;

describe('a remote export into a DuckDB table, its worker SIGKILLed again and again', () => {
  it('a standby on the same machine takes over each time; the table ends with every message once, per key in order', async () => {
    const dir = tempDir('orderly-fleet-duck-');
    const remote = await startRemote();
    const workers: OrderlyRunProcess[] = [];
    const duckdbPath = join(dir.path, 'export.duckdb');
    try {
      const admin = remote.client();
      const [topic] = await admin.createTopic('events');
      await topic.createSubscription('events-to-table', { enableMessageOrdering: true, ackDeadlineSeconds: 10 });
      await publishKeyed(remote.client(), 'events', MESSAGES, KEYS);
      const job = writeRemoteJob(
        dir.path,
        remote.host,
        {
          duckdb: {
            path: duckdbPath,
            init: [
              `CREATE TABLE IF NOT EXISTS events(subscription_name VARCHAR, message_id VARCHAR, publish_time TIMESTAMP, data VARCHAR,
                 attributes JSON, ordering_key VARCHAR, sequence BIGINT)`,
            ],
          },
        },
        {
          // Small batches, so every kill lands between commits and leaves some written but not acked.
          flowControl: { maxMessages: 300 },
          exports: [
            {
              subscription: 'events-to-table',
              enableMessageOrdering: true,
              bigqueryConfig: { table: 'p.main.events', writeMetadata: true },
            },
          ],
        },
      );
      const start = () => {
        const child = new OrderlyRunProcess(job);
        workers.push(child);
        return child;
      };
      let active = start();
      await waitFor('the first worker to export', async () => (await workerStatus(active)).exported > 0, 60_000);
      for (let kill = 1; kill <= KILLS; kill++) {
        const standby = start();
        await waitFor('the second worker to wait as a standby', async () => (await workerStatus(standby)).standby !== undefined, 60_000);
        expect((await workerStatus(standby)).standby).toMatch(/is open in another process \(pid \d+\)/);
        // Killed at a random moment while it writes.
        await new Promise((r) => setTimeout(r, 200 + Math.random() * 800));
        active.kill('SIGKILL');
        expect((await active.exited).signal).toBe('SIGKILL');
        await waitFor('the standby to take over', async () => {
          const s = await workerStatus(standby);
          return s.standby === undefined && s.source.state === 'streaming' && s.state === 'ACTIVE';
        });
        active = standby;
      }
      await waitFor('every message acked', async () => (await remote.backlog('events-to-table')) === 0, 120_000);
      active.kill('SIGTERM');
      expect((await active.exited).code).toBe(0);

      const [totals] = await queryDuckDb(
        duckdbPath,
        'SELECT count(*) AS n, count(DISTINCT message_id) AS ids, count(DISTINCT ordering_key) AS keys FROM events',
      );
      expect(totals).toEqual({ n: BigInt(MESSAGES), ids: BigInt(MESSAGES), keys: BigInt(KEYS) });
      // Per key, rows were appended (rowid order) in publish order: payloads k<i>:0, k<i>:1, ...
      const badKeys = await queryDuckDb(
        duckdbPath,
        `SELECT ordering_key FROM (SELECT ordering_key, list(data ORDER BY rowid) AS payloads FROM events GROUP BY ordering_key)
         WHERE payloads <> list_transform(range(0, ${MESSAGES / KEYS}), i -> ordering_key || ':' || i)`,
      );
      expect(badKeys).toEqual([]);
    } finally {
      for (const w of workers) w.kill('SIGKILL');
      await Promise.all(workers.map((w) => w.exited));
      await closeDuckDb(duckdbPath);
      await remote.close();
      dir.remove();
    }
  }, 240_000);
});
