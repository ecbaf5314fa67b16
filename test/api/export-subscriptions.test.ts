import { PubSub } from '@google-cloud/pubsub';
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { readRecords } from '../../connectors/object-storage/record-format.js';
import { closeDuckDb, queryDuckDb } from '../../src/duckdb/database.js';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait-for.js';
import { startTestS3 } from '../helpers/s3.js';

const bin = fileURLToPath(new URL('../../bin/orderly.js', import.meta.url));

describe("export subscriptions created through Google's client", () => {
  it('bigqueryConfig writes DuckDB rows and cloudStorageConfig writes S3 objects, per key in order', async () => {
    const dir = tempDir();
    const s3 = await startTestS3();
    const bucket = await s3.bucket();
    const duckdb = join(dir.path, 'data', 'export.duckdb');
    const job = join(dir.path, 'job.yaml');
    writeFileSync(
      job,
      stringify({
        projectId: 'export-project',
        dataDir: './data',
        duckdb: {
          path: './data/export.duckdb',
          init: [
            'CREATE SCHEMA IF NOT EXISTS sales',
            'CREATE TABLE IF NOT EXISTS sales.events(subscription_name VARCHAR, message_id VARCHAR, publish_time TIMESTAMP, data VARCHAR, attributes VARCHAR, ordering_key VARCHAR, sequence BIGINT)',
          ],
        },
        objectStorage: s3.settings,
        metrics: { port: 0 },
      }),
    );
    const server = spawn(process.execPath, [bin, 'serve', '--config', job, '--port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      const host = await new Promise<string>((resolve, reject) => {
        server.stdout.on('data', (c) => {
          const m = /PUBSUB_EMULATOR_HOST=(\S+)\)/.exec(String(c));
          if (m) resolve(m[1]!);
        });
        server.on('exit', (code) => reject(new Error(`serve exited (${code})`)));
      });
      process.env.METADATA_SERVER_DETECTION = 'none';
      const pubsub = new PubSub({ projectId: 'export-project', apiEndpoint: host, emulatorMode: true });
      const [topic] = await pubsub.createTopic('sales');
      const [toTable] = await topic.createSubscription('sales-to-table', {
        enableMessageOrdering: true,
        bigqueryConfig: { table: 'export-project.sales.events', writeMetadata: true },
      });
      await topic.createSubscription('sales-to-files', {
        enableMessageOrdering: true,
        cloudStorageConfig: {
          bucket,
          filenamePrefix: 'sales/',
          filenameDatetimeFormat: 'YYYY-MM-DDThh:mm:ssZ',
          avroConfig: { writeMetadata: true },
        },
      });
      topic.setPublishOptions({ messageOrdering: true });
      await Promise.all(
        Array.from({ length: 60 }, (_, i) => topic.publishMessage({ data: Buffer.from(`${i}`), orderingKey: `k${i % 4}` })),
      );
      const [meta] = await toTable.getMetadata();
      expect(meta.state).toBe('ACTIVE');
      expect(meta.bigqueryConfig?.table).toBe('export-project.sales.events');
      const metrics = JSON.parse(readFileSync(join(dir.path, 'data', 'orderly.lock'), 'utf8')).metrics as string;
      // The table is written as messages come; the files export holds them in an open file until the stop.
      await waitFor('the table export, and every message in the files export', async () => {
        const status = (await (await fetch(`${metrics}/status`)).json()) as { subscription: string; backlog: number; delivered: number }[];
        const files = status.find((s) => s.subscription.endsWith('/sales-to-files'));
        return status.find((s) => s.subscription.endsWith('/sales-to-table'))?.backlog === 0 && (files?.delivered ?? 0) >= 60;
      });
      await pubsub.close();
      server.kill('SIGTERM'); // drains: the open object file is finalized and acked
      await new Promise((r) => server.once('exit', r));

      const rows = await queryDuckDb(
        duckdb,
        `SELECT ordering_key, list(data ORDER BY rowid) AS data FROM sales.events GROUP BY ordering_key ORDER BY ordering_key`,
      );
      expect(rows.map((r) => r.ordering_key)).toEqual(['k0', 'k1', 'k2', 'k3']);
      for (const [k, r] of rows.entries()) {
        expect((r.data as { items: string[] }).items).toEqual(Array.from({ length: 15 }, (_, i) => String(i * 4 + k)));
      }
      await closeDuckDb(duckdb);
      const objects = await s3.list(bucket, 'sales/');
      expect(objects.length).toBeGreaterThanOrEqual(1);
      const records = (
        await Promise.all(objects.map(async (o) => readRecords(await s3.get(bucket, o), { kind: 'avro', writeMetadata: true })))
      ).flat();
      expect(records).toHaveLength(60);
      for (let k = 0; k < 4; k++) {
        expect(records.filter((r) => r.orderingKey === `k${k}`).map((r) => r.sequence)).toEqual(
          Array.from({ length: 15 }, (_, i) => i + 1),
        );
      }
    } finally {
      server.kill('SIGKILL');
      await s3.close();
      dir.remove();
    }
  }, 90_000);
});
