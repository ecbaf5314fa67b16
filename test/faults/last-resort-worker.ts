/**
 * Child process for the last-resort test: installs the handler `run` and `serve` install, serves the
 * metrics, then lets a rejection go unhandled and an exception go uncaught, and keeps working.
 * Prints `METRICS <url>` when ready and `ALIVE` after both errors.
 */
import { ExportManager } from '../../src/connector/export-manager.js';
import { PubSubCore } from '../../src/core/pubsub-core.js';
import { serveMetrics } from '../../src/job/metrics.js';
import { keepServingOnUnexpectedErrors } from '../../src/job/unexpected-errors.js';
import { createLogger } from '../../src/log.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';

const [dir] = process.argv.slice(2) as [string];
const logger = createLogger({ level: 'info' });
keepServingOnUnexpectedErrors(logger);
const core = await PubSubCore.open({ store: SqliteStore.open(dir, { durability: 'process' }) });
const metrics = await serveMetrics(core, new ExportManager({ core, settings: { dataDir: dir }, logger }), '127.0.0.1', 0);
void Promise.reject(new Error('a rejection nobody handles'));
setTimeout(() => {
  throw new Error('an exception nobody catches');
}, 10);
setTimeout(() => {
  core.createTopic('still-working').then(
    () => process.stdout.write(`METRICS ${metrics.url}\nALIVE\n`),
    (e: unknown) => {
      process.stderr.write(`the core stopped working: ${(e as Error).message}\n`);
      process.exit(1);
    },
  );
}, 200);
