import { join } from 'node:path';
import { registerBuiltInConnectors } from '../../connectors/index.js';
import { Backoff } from '../../src/connector/backoff.js';
import { ExportManager } from '../../src/connector/export-manager.js';
import { closeDuckDb } from '../../src/duckdb/database.js';
import { PubSubCore } from '../../src/core/pubsub-core.js';
import { createLogger } from '../../src/log.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';

registerBuiltInConnectors();

/**
 * A core on real time (export runners use timers) with an export manager over `dir`, started unless
 * `start` is false (a setup that only publishes a backlog for a later run to export).
 */
export async function openExport(
  dir: string,
  settings: Record<string, unknown> = {},
  { start = true, runner = {} }: { start?: boolean; runner?: { stallMs?: number; maxBatchMessages?: number } } = {},
) {
  const core = await PubSubCore.open({
    store: SqliteStore.open(join(dir, 'store'), { durability: 'process' }),
    projectId: 'p',
    tickMs: 20,
  });
  const duckdbPath = join(dir, 'export.duckdb');
  const exports = new ExportManager({
    core,
    settings: { dataDir: dir, duckdbPath, ...settings },
    logger: createLogger(),
    runner: { flushIntervalMs: 100, backoff: () => new Backoff(20, 200), ...runner },
  });
  if (start) await exports.start();
  return {
    core,
    exports,
    duckdbPath,
    async close() {
      await exports.stop();
      await core.close();
      await closeDuckDb(duckdbPath);
    },
  };
}
