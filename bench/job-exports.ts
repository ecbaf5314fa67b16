/** The exports of a benchmark's core, started as `orderly run` starts them. */
import type { ConnectorSettings } from '../src/connector/connector.js';
import { ExportManager } from '../src/connector/export-manager.js';
import type { PubSubCore } from '../src/core/pubsub-core.js';
import { HeapGrowth } from '../src/job/heap-growth.js';
import { createLogger } from '../src/log.js';

/**
 * As `orderly run` with the job file's memory section left out: each export's connector sets its window,
 * its runner's budget and, from its start on, the heap's growth (ExportMemory).
 */
export function jobExports(core: PubSubCore, settings: ConnectorSettings): ExportManager {
  const heapGrowth = new HeapGrowth(undefined, true);
  return new ExportManager({
    core,
    settings,
    logger: createLogger({ level: 'warn' }),
    onRunnerStart: (memory) => heapGrowth.exporting(memory),
  });
}
