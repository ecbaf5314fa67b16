import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/temp-dir.js';
import { startServe } from '../helpers/serve-process.js';

const WARNING = 'subscriptions of the data directory that the job file does not list';

describe('subscriptions of the data directory that the job file no longer lists', () => {
  it('orderly serve --config names them, as orderly run does: a renamed one goes on exporting under its old name', async () => {
    const dir = tempDir();
    const job = join(dir.path, 'job.yaml');
    const write = (subscription: string) =>
      writeFileSync(
        job,
        stringify({ dataDir: './data', topics: [{ name: 'events' }], subscriptions: [{ name: subscription, topic: 'events' }] }),
      );
    try {
      write('orders');
      const first = await startServe(['--config', job]);
      await first.stop();
      expect(first.output()).not.toContain(WARNING);

      write('orders-v2');
      const renamed = await startServe(['--config', job]);
      await renamed.stop();
      const warning = renamed
        .output()
        .split('\n')
        .find((line) => line.includes(WARNING));
      expect(warning && (JSON.parse(warning) as { subscriptions: string[] }).subscriptions).toEqual([
        'projects/orderly-local/subscriptions/orders',
      ]);
    } finally {
      dir.remove();
    }
  });
});
