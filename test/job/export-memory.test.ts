import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { stringify } from 'yaml';
import '../../examples/jsonl-file-connector/src/index.js';
import type { ExportMemory } from '../../src/connector/capabilities.js';
import { registerConnector, registeredConnectors } from '../../src/connector/registry.js';
import { InvalidArgumentError } from '../../src/core/errors.js';
import { queryDuckDb } from '../../src/duckdb/database.js';
import { loadJob } from '../../src/job/job-config.js';
import { JobRuntime, type JobMode } from '../../src/job/job-runtime.js';
import { createLogger } from '../../src/log.js';
import { tempDirPerTest } from '../helpers/temp-dir-per-test.js';
import { waitFor } from '../helpers/wait-for.js';

const dir = tempDirPerTest();
let runtime: JobRuntime | undefined;
afterEach(async () => {
  await runtime?.stop();
  runtime = undefined;
});

/** Writes the job file (projectId, dataDir and the topic `events` added) and runs it. */
async function startJob(doc: Record<string, unknown>, mode?: JobMode): Promise<JobRuntime> {
  const file = join(dir.path, 'job.yaml');
  writeFileSync(file, stringify({ projectId: 'memory-test', dataDir: './data', topics: [{ name: 'events' }], ...doc }));
  runtime = await JobRuntime.start(loadJob(file), createLogger({ level: 'silent' }), { mode });
  return runtime;
}

/** Runs a job with a table export (`to-table`) and an ordered pull subscription nobody pulls (`pulled`). */
function tableJob(memory?: Record<string, unknown>, mode?: JobMode): Promise<JobRuntime> {
  return startJob(
    {
      duckdb: {
        path: './export.duckdb',
        init: [
          `CREATE TABLE IF NOT EXISTS events(subscription_name VARCHAR, message_id VARCHAR, publish_time TIMESTAMP, data JSON,
           attributes JSON, ordering_key VARCHAR, sequence BIGINT)`,
        ],
      },
      subscriptions: [
        {
          name: 'to-table',
          topic: 'events',
          enableMessageOrdering: true,
          bigqueryConfig: { table: 'memory-test.main.events', writeMetadata: true },
        },
        { name: 'pulled', topic: 'events', enableMessageOrdering: true },
      ],
      ...(memory && { memory }),
    },
    mode,
  );
}

/** The window of a subscription (the core's metrics): an export's applies once it is attached (its runner `ready`). */
const windowOf = (job: JobRuntime, subscription: string) => job.core.metrics(subscription).windowMessages;

it("a table export reads 10,000 messages ahead and holds 10,000, the heap grows 30% (its connector's ExportMemory); a 10 MB message still goes in", async () => {
  const job = await tableJob();
  await job.exports.runner('to-table')!.ready;
  expect(windowOf(job, 'to-table')).toBe(10_000);
  expect(job.exports.runner('to-table')!.budget).toBe(10_000);
  expect(job.heapGrowth.percent).toBe(30);
  // Other subscriptions keep the core's window (memory.messagesPerSubscription's default).
  expect(windowOf(job, 'pulled')).toBe(20_000);

  const large = JSON.stringify({ pad: 'x'.repeat(10_000_000 - 10) });
  expect(Buffer.byteLength(large)).toBe(10_000_000);
  await job.core.publish('events', [{ data: '{"n":1}', orderingKey: 'k' }]);
  await job.core.publish('events', [{ data: large, orderingKey: 'k' }]);
  await job.core.publish('events', [{ data: '{"n":3}', orderingKey: 'k' }]);
  await waitFor('the export', () => job.exports.runner('to-table')!.stats.written === 3, 60_000);
  const rows = await queryDuckDb(
    join(dir.path, 'export.duckdb'),
    'SELECT sequence::INTEGER AS sequence, strlen(data::VARCHAR)::INTEGER AS bytes FROM events ORDER BY sequence',
  );
  expect(rows).toEqual([
    { sequence: 1, bytes: 7 },
    { sequence: 2, bytes: 10_000_000 },
    { sequence: 3, bytes: 7 },
  ]);
});

// Before: the subscription's reader filled the core's window (20,000) when the store opened, seconds before
// the export's runner attached and lowered it to 10,000, so a job started with a backlog held twice the
// export's window until the export drained it.
it("a table export's window applies from the job's start: with a backlog, its subscription never reads more ahead", async () => {
  const stored = await tableJob(undefined, 'store-only');
  const keys = 100;
  for (let batch = 0; batch < 30; batch++)
    await stored.core.publish(
      'events',
      Array.from({ length: 1000 }, (_, i) => ({ data: `{"n":${batch * 1000 + i}}`, orderingKey: `k${i % keys}` })),
    );
  await stored.stop();
  runtime = undefined;

  const job = await tableJob();
  expect(windowOf(job, 'to-table')).toBe(10_000);
  let most = 0;
  const sample = setInterval(() => (most = Math.max(most, job.core.metrics('to-table').heldMessages)), 1);
  try {
    await waitFor('the export', () => job.exports.runner('to-table')!.stats.written === 30_000, 120_000);
  } finally {
    clearInterval(sample);
  }
  expect(most).toBeGreaterThan(0);
  expect(most).toBeLessThanOrEqual(10_000);
  // The subscription nobody pulls keeps the core's window.
  expect(windowOf(job, 'pulled')).toBe(20_000);
  expect(job.core.metrics('pulled').heldMessages).toBe(20_000);
});

it("the job file's memory settings win over what the table export's connector asks for", async () => {
  const job = await tableJob({ messagesPerSubscription: 12_000, exportMessages: 11_000, heapGrowthPercent: 45 });
  await job.exports.runner('to-table')!.ready;
  expect(job.exports.runner('to-table')!.budget).toBe(11_000);
  expect(windowOf(job, 'to-table')).toBe(12_000);
  expect(windowOf(job, 'pulled')).toBe(12_000);
  expect(job.heapGrowth.percent).toBe(45);
});

it('an export whose connector declares nothing keeps the defaults: window and budget 20,000, the heap at 60%', async () => {
  const job = await startJob({
    subscriptions: [{ name: 'to-file', topic: 'events', exportConfig: { connector: 'jsonl-file', path: join(dir.path, 'out.jsonl') } }],
  });
  await job.exports.runner('to-file')!.ready;
  expect(job.exports.runner('to-file')!.budget).toBe(20_000);
  expect(windowOf(job, 'to-file')).toBe(20_000);
  expect(job.heapGrowth.percent).toBe(60);
});

it("a connector's memory declaration outside what the job file accepts is refused at registration, and the connector not registered", () => {
  const factory = (name: string, memory: ExportMemory) => ({
    name,
    memory,
    parseConfig: () => ({}),
    create: () => {
      throw new Error('never made');
    },
  });
  expect(() => registerConnector(factory('tiny-window', { windowMessages: 10 }))).toThrow(
    new InvalidArgumentError('connector "tiny-window": memory.windowMessages', 'an integer from 100 to 10000000, got 10'),
  );
  expect(() => registerConnector(factory('wild-heap', { exportMessages: 5_000, heapGrowthPercent: 1.5 }))).toThrow(
    'connector "wild-heap": memory.heapGrowthPercent: an integer from 10 to 300, got 1.5',
  );
  expect(registeredConnectors()).not.toContain('tiny-window');
  expect(registeredConnectors()).not.toContain('wild-heap');
});

/** Runs a job with one object-storage export (`to-files`) of `format` to the embedded S3 server. */
function objectJob(format: Record<string, unknown>): Promise<JobRuntime> {
  return startJob({
    objectStorage: { embedded: true, buckets: ['memory-bucket'] },
    subscriptions: [
      { name: 'to-files', topic: 'events', enableMessageOrdering: true, cloudStorageConfig: { bucket: 'memory-bucket', ...format } },
    ],
  });
}

it("a Parquet export reads 10,000 messages ahead, holds the default 20,000, the heap grows 30% (its connector's ExportMemory, by format)", async () => {
  const job = await objectJob({ parquetConfig: { writeMetadata: true } });
  await job.exports.runner('to-files')!.ready;
  expect(windowOf(job, 'to-files')).toBe(10_000);
  expect(job.exports.runner('to-files')!.budget).toBe(20_000);
  expect(job.heapGrowth.percent).toBe(30);
});

it('a text export of the same connector keeps the defaults: window and budget 20,000, the heap at 60%', async () => {
  const job = await objectJob({ textConfig: {} });
  await job.exports.runner('to-files')!.ready;
  expect(windowOf(job, 'to-files')).toBe(20_000);
  expect(job.exports.runner('to-files')!.budget).toBe(20_000);
  expect(job.heapGrowth.percent).toBe(60);
});

it("a connector's memory declaration by config is checked as an export is made: out of range, the subscription is refused", async () => {
  registerConnector({
    name: 'memory-by-config',
    memory: (config: { window: number }) => ({ windowMessages: config.window }),
    parseConfig: (raw) => raw as { window: number },
    create: () => {
      throw new Error('never opened');
    },
  });
  const job = await startJob({});
  await expect(
    job.core.createSubscription('by-config', { topic: 'events', exportConfig: { connector: 'memory-by-config', window: 10 } }),
  ).rejects.toThrow('connector "memory-by-config": memory.windowMessages: an integer from 100 to 10000000, got 10');
  expect(job.core.hasSubscription('by-config')).toBe(false);
});

it('an export config its connector refuses now (stored before it could) fails that export only: the job opens and its other exports run', async () => {
  let strict = false;
  registerConnector({
    name: 'refuses-later',
    memory: (config: { window: number }) => ({ windowMessages: config.window }),
    parseConfig: (raw) => {
      if (strict) throw new Error('this config is refused now');
      return raw as { window: number };
    },
    create: () =>
      ({ write: async () => ({ written: [], failed: [], deferred: [] }), flush: async () => {}, close: async () => {} }) as never,
  });
  const first = await startJob({});
  await first.core.createSubscription('later', { topic: 'events', exportConfig: { connector: 'refuses-later', window: 500 } });
  await first.stop();
  runtime = undefined;
  strict = true;
  const job = await startJob({ subscriptions: [{ name: 'plain', topic: 'events' }] });
  expect(job.core.hasSubscription('later')).toBe(true);
  expect(windowOf(job, 'later')).toBe(20_000);
  await waitFor(
    'the refused export to say why',
    () => job.exports.runner('later')?.stats.lastError?.message.includes('this config is refused now') === true,
  );
  await job.core.publish('events', [{ data: Buffer.from('x') }]);
  await waitFor('the plain subscription to deliver', async () => (await job.core.pull('plain', { maxMessages: 1 })).length === 1);
});
