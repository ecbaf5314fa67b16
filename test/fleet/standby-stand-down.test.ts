import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { closeDuckDb, queryDuckDb } from '../../src/duckdb/database.js';
import { waitFor } from '../helpers/wait-for.js';
import { openFleetScene, publishKeyed, tableFleetJob, workerStatus } from '../helpers/fleet.js';

const MESSAGES = 2000;
const KEYS = 50;

describe('a DuckDB export worker whose file another worker took over', () => {
  it('gives back what it held (the file deleted under it, a standby took the path), and takes the file back later: every message once, in order', async () => {
    const scene = await openFleetScene('orderly-fleet-standdown-');
    const { dir, remote } = scene;
    const duckdbPath = join(dir.path, 'export.duckdb');
    try {
      const job = await tableFleetJob(dir.path, remote, duckdbPath, { maxMessages: 100, sequence: false });
      const first = scene.worker(job);
      await waitFor('the first worker to stream', async () => (await workerStatus(first)).source.state === 'streaming', 60_000);
      const second = scene.worker(job);
      await waitFor('the second worker to wait as a standby', async () => (await workerStatus(second)).standby !== undefined, 60_000);

      // The file goes from under the first worker: the standby creates a new one at the path and takes it,
      // and the first worker's next write finds its file gone, then the path held by the other.
      rmSync(duckdbPath);
      // The standby takes the path (a new file, its WAL beside it) before the first worker notices.
      await waitFor(
        'the second worker to take the path over',
        async () => (await workerStatus(second)).source.state === 'streaming',
        60_000,
      );
      await publishKeyed(remote.client(), 'events', MESSAGES, KEYS);
      await waitFor('the first worker to wait as a standby', async () => (await workerStatus(first)).standby !== undefined, 60_000);
      await waitFor('every message acked', async () => (await remote.backlog('events-to-table')) === 0, 60_000);
      const stoodDown = await workerStatus(first);
      expect(stoodDown.standby).toMatch(new RegExp(`open in another process \\(pid ${second.pid}\\)`));
      expect(stoodDown.backlog).toBe(0);
      expect(stoodDown.source.state).toBe('connecting');
      // Not the failure it had before it stood down: the file is whole, the other worker writes it.
      expect(stoodDown.state).toBe('ACTIVE');

      // And it takes the file back once the other exits: streaming again, it exports what comes next.
      second.kill('SIGKILL');
      await second.exited;
      const publisher = remote.client().topic('events', { messageOrdering: true });
      await Promise.all(
        Array.from({ length: MESSAGES }, (_, i) =>
          publisher.publishMessage({
            data: Buffer.from(`k${i % KEYS}:${MESSAGES / KEYS + Math.floor(i / KEYS)}`),
            orderingKey: `k${i % KEYS}`,
          }),
        ),
      );
      await waitFor('the first worker to take the file back', async () => (await workerStatus(first)).standby === undefined, 60_000);
      await waitFor('every later message acked', async () => (await remote.backlog('events-to-table')) === 0, 60_000);

      first.kill('SIGTERM');
      expect((await first.exited).code).toBe(0);
      const [totals] = await queryDuckDb(duckdbPath, 'SELECT count(*) AS n, count(DISTINCT message_id) AS ids FROM events');
      expect(totals).toEqual({ n: BigInt(2 * MESSAGES), ids: BigInt(2 * MESSAGES) });
      const badKeys = await queryDuckDb(
        duckdbPath,
        `SELECT ordering_key FROM (SELECT ordering_key, list(data ORDER BY rowid) AS payloads FROM events GROUP BY ordering_key)
         WHERE payloads <> list_transform(range(0, ${(2 * MESSAGES) / KEYS}), i -> ordering_key || ':' || i)`,
      );
      expect(badKeys).toEqual([]);
    } finally {
      await closeDuckDb(duckdbPath);
      await scene.close();
    }
  }, 240_000);
});
