import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parquetScratchDir } from '../../connectors/object-storage/parquet-scratch.js';
import { OrderlyRunProcess } from '../faults/orderly-run-process.js';
import { orderly } from '../helpers/cli.js';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait-for.js';

const cleanups: (() => void | Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/**
 * 10,000 messages of ~500 bytes in one Parquet file: at memory.duckdb 24MiB, DuckDB spills while it
 * encodes it (and the file is written), so its scratch folder exists until the scratch closes.
 */
const FILE_MESSAGES = 10_000;

describe('the Parquet writer spill folder', () => {
  it('is gone once a job stopped, and what a SIGKILLed job left is gone once it ran again', async () => {
    const dir = tempDir('orderly-parquet-spill-');
    cleanups.push(() => dir.remove());
    // The jobs' own temp dir: whatever they leave there is theirs.
    const tmp = join(dir.path, 'tmp');
    mkdirSync(tmp);
    const job = join(dir.path, 'job.yaml');
    writeFileSync(
      job,
      [
        'projectId: parquet-spill',
        'dataDir: ./data',
        `memory: { duckdb: 24MiB, exportMessages: ${4 * FILE_MESSAGES} }`,
        'metrics: { port: 0 }',
        'objectStorage: { embedded: true, buckets: [spill-bucket] }',
        'topics: [{ name: events }]',
        'subscriptions:',
        `  - { name: to-parquet, topic: events, cloudStorageConfig: { bucket: spill-bucket, maxMessages: ${FILE_MESSAGES}, parquetConfig: { writeMetadata: true } } }`,
      ].join('\n'),
    );
    const publishFile = async (from: number) => {
      const lines = Array.from({ length: FILE_MESSAGES }, (_, i) =>
        JSON.stringify({ n: from + i, pad: randomBytes(360).toString('base64') }),
      );
      writeFileSync(join(dir.path, 'batch.jsonl'), `${lines.join('\n')}\n`);
      const published = await orderly('publish', job, '--topic', 'events', '--file', join(dir.path, 'batch.jsonl'));
      expect(published.code, published.stderr).toBe(0);
    };
    /** Runs the job until it exported `exported` messages since it started; returns it still running. */
    const runUntilExported = async (exported: number) => {
      const run = new OrderlyRunProcess(job, [], { TMPDIR: tmp });
      cleanups.push(() => run.kill('SIGKILL'));
      await run.ready;
      await waitFor(
        'the file exported',
        async () => {
          const status = await orderly('status', job, '--json');
          return status.code === 0 && (JSON.parse(status.stdout) as { exported: number }[])[0]!.exported === exported;
        },
        60_000,
      );
      return run;
    };
    const left = () => ({ tmp: readdirSync(tmp), scratch: existsSync(parquetScratchDir(join(dir.path, 'data'))) });

    await publishFile(0);
    const killed = await runUntilExported(FILE_MESSAGES);
    killed.kill('SIGKILL');
    await killed.exited;

    await publishFile(FILE_MESSAGES);
    const restarted = await runUntilExported(FILE_MESSAGES);
    restarted.kill('SIGTERM');
    expect((await restarted.exited).code, restarted.output()).toBe(0);
    // Before: tmp held orderly-parquet-<pid of the killed job>, which nothing would ever remove.
    expect(left()).toEqual({ tmp: [], scratch: false });

    // Both files are whole: every message once.
    const read = await orderly(
      'query',
      job,
      'SELECT count(*)::INTEGER AS n, count(DISTINCT message_id)::INTEGER AS ids FROM to_parquet',
      '--json',
    );
    expect(read.code, read.stderr).toBe(0);
    expect(JSON.parse(read.stdout)).toEqual([{ n: 2 * FILE_MESSAGES, ids: 2 * FILE_MESSAGES }]);
  });
});
