import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock } from '../../src/core/clock.js';
import { PubSubCore } from '../../src/core/pubsub-core.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';

export function tempDir(prefix = 'orderly-test-'): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), prefix));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

/** A core on a real SQLite store in `dir`, driven by a manual clock. */
export async function openCore(dir: string, clock = new ManualClock()): Promise<{ core: PubSubCore; clock: ManualClock }> {
  const core = await PubSubCore.open({ store: SqliteStore.open(dir, { durability: 'process' }), clock, projectId: 'p' });
  return { core, clock };
}

/** Lets queued microtasks and the group commit (setImmediate) run. */
export function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(() => setImmediate(resolve)));
}
