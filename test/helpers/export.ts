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

/**
 * Polls until `check` returns true (real time), or fails with `what`: a function is called at the timeout,
 * so the failure can say the state it waited on (what a failure seen once in CI needs to be understood).
 */
export async function waitFor(what: string | (() => string), check: () => boolean | Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for ${typeof what === 'string' ? what : what()}`);
}
