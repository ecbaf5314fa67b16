import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { closeDuckDb, queryDuckDb } from '../../src/duckdb/database.js';
import { waitFor } from '../helpers/wait-for.js';
import { openFleetScene, publishKeyed, tableFleetJob, workerStatus } from '../helpers/fleet.js';

const MESSAGES = 4000;
const KEYS = 100;
const KILLS = 3;

describe('a remote export into a DuckDB table, its worker SIGKILLed again and again', () => {
  it('a standby on the same machine takes over each time; the table ends with every message once, per key in order', async () => {
    const scene = await openFleetScene('orderly-fleet-duck-');
    const { dir, remote } = scene;
    const duckdbPath = join(dir.path, 'export.duckdb');
    try {
      // Small batches, so every kill lands between commits and leaves some written but not acked.
      const job = await tableFleetJob(dir.path, remote, duckdbPath, { maxMessages: 300, sequence: true });
      await publishKeyed(remote.client(), 'events', MESSAGES, KEYS);
      const start = () => scene.worker(job);
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
      await closeDuckDb(duckdbPath);
      await scene.close();
    }
  }, 240_000);
});
