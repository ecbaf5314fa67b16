import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseObjectStorageConfig } from '../../connectors/object-storage/config.js';
import { auditSubscription } from '../../connectors/object-storage/audit.js';
import { committedObjects } from '../helpers/committed-objects.js';
import { manifestPath } from '../../connectors/object-storage/object-writer.js';
import { tempDir } from '../helpers/temp-dir.js';
import { runExporterProcess } from '../helpers/exporter-process.js';
import { openExport } from '../helpers/export.js';
import { startTestS3 } from '../helpers/s3.js';

const worker = fileURLToPath(new URL('./object-export-worker.ts', import.meta.url));
const MESSAGES = 20_000;
const KEYS = 200;

function runExporter(dir: string, s3: unknown, mode: 'run' | 'drain', killAfterMs?: number): Promise<'done' | 'killed'> {
  return runExporterProcess(worker, [dir, mode], { killAfterMs, env: { ORDERLY_TEST_S3: JSON.stringify(s3) } });
}

describe('object-storage export crash safety', () => {
  it('after SIGKILLs mid-export the manifest view holds every message exactly once, and no stray object', async () => {
    const dir = tempDir('orderly-s3-crash-');
    const s3 = await startTestS3();
    try {
      const bucket = await s3.bucket();
      const cloudStorageConfig = {
        bucket,
        maxMessages: 1000,
        filenameDatetimeFormat: 'YYYY-MM-DDThh:mm:ssZ',
        parquetConfig: { writeMetadata: true },
      };
      const setup = await openExport(dir.path, { objectStorage: s3.settings }, { start: false });
      await setup.core.createTopic('crash-topic');
      await setup.core.createSubscription('crash-sub', { topic: 'crash-topic', enableMessageOrdering: true, cloudStorageConfig });
      const subscription = { name: 'projects/p/subscriptions/crash-sub', uid: setup.core.identity('crash-sub').uid };
      for (let i = 0; i < MESSAGES; i += 1000) {
        await setup.core.publish(
          'crash-topic',
          Array.from({ length: 1000 }, (_, j) => ({ data: `m${i + j}`, orderingKey: `key-${(i + j) % KEYS}` })),
        );
      }
      await setup.close();

      let kills = 0;
      for (let round = 0; round < 6; round++) {
        await runExporter(dir.path, s3.settings, 'run', 300 + Math.floor(Math.random() * 1500));
        kills++;
      }
      expect(await runExporter(dir.path, s3.settings, 'drain')).toBe('done');
      expect(kills).toBe(6);

      const report = await auditSubscription(subscription, parseObjectStorageConfig(cloudStorageConfig), {
        dataDir: dir.path,
        objectStorage: s3.settings,
      });
      expect(report).toMatchObject({
        records: MESSAGES,
        keys: KEYS,
        missing: { count: 0 },
        duplicates: { count: 0 },
        outOfOrderInFile: { count: 0 },
        objectErrors: { count: 0 },
      });
      // Every object in the bucket is a committed one: uploads a crash left uncommitted were removed.
      expect(await s3.list(bucket)).toEqual(committedObjects(manifestPath(dir.path, subscription)));
    } finally {
      await s3.close();
      dir.remove();
    }
  }, 300_000);
});
