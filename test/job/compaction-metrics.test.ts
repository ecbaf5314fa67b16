import { statSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { ExportManager } from '../../src/connector/export-manager.js';
import { serveMetrics } from '../../src/job/metrics.js';
import { createLogger } from '../../src/log.js';
import { openCore } from '../helpers/core.js';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait-for.js';

const dir = tempDir('orderly-compaction-metrics-');
afterEach(() => dir.remove());

/** The value of an unlabelled series on the page. */
function value(text: string, name: string): number | undefined {
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : undefined;
}

// Draining a 1M backlog, /metrics showed the backlog fall to 0 but nothing of the 1.1 GB store compaction
// then gave back (it deletes a chunk at a time, over a minute): an operator could not tell it from a leak.
it('/metrics shows the messages compaction deleted and the store size on disk as they are', async () => {
  const { core } = await openCore(join(dir.path, 'store'));
  const exports = new ExportManager({ core, settings: { dataDir: dir.path }, logger: createLogger({ level: 'silent' }) });
  const metrics = await serveMetrics(core, exports, '127.0.0.1', 0);
  const scrape = async () => (await fetch(`${metrics.url}/metrics`)).text();
  const onDisk = () =>
    ['orderly.sqlite', 'orderly.sqlite-wal'].reduce(
      (n, f) => n + (statSync(join(dir.path, 'store', f), { throwIfNoEntry: false })?.size ?? 0),
      0,
    );
  // The writer thread checkpoints the WAL every 200 ms, copying its pages into the database file, which grows:
  // a scrape is compared with the files once that has settled (CI saw a checkpoint land between the two reads).
  const settledOnDisk = async () => {
    let last = -1;
    await waitFor(
      () => `the store's files to stop changing (last ${last} bytes)`,
      async () => {
        const now = onDisk();
        if (now === last) return true;
        last = now;
        await new Promise((r) => setTimeout(r, 500));
        return false;
      },
    );
    return last;
  };
  try {
    await core.createTopic('events');
    await core.createSubscription('reader', { topic: 'events' });
    await core.publish(
      'events',
      Array.from({ length: 300 }, (_, i) => ({ data: Buffer.alloc(1024, i) })),
    );
    for (let got = 0; got < 300;) {
      const pulled = await core.pull('reader', { maxMessages: 100 });
      await core.acknowledge(
        'reader',
        pulled.map((m) => m.ackId),
      );
      got += pulled.length;
    }
    await core.flushed();
    let settled = await settledOnDisk();
    let text = await scrape();
    expect(value(text, 'orderly_compacted_messages_total')).toBe(0);
    expect(value(text, 'orderly_store_disk_bytes')).toBe(settled);

    const { deletedMessages } = await core.compact();
    expect(deletedMessages).toBe(300);
    settled = await settledOnDisk();
    text = await scrape();
    expect(value(text, 'orderly_compacted_messages_total')).toBe(300);
    expect(value(text, 'orderly_store_disk_bytes')).toBe(settled);
    expect(text).toMatch(/^# TYPE orderly_compacted_messages_total counter$/m);
    expect(text).toMatch(/^# TYPE orderly_store_disk_bytes gauge$/m);
  } finally {
    await metrics.close();
    await exports.stop();
    await core.close();
  }
});
