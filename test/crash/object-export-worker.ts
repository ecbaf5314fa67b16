/**
 * Child process for the object-storage crash test: exports `crash-sub` to the S3 endpoint given in
 * ORDERLY_TEST_S3 (JSON). In "drain" mode it waits until the rest of the backlog is buffered, stops the
 * export (open files are finalized and acked) and prints DONE.
 */
import { openExport } from '../helpers/export.js';

const [dir, mode] = process.argv.slice(2) as [string, 'run' | 'drain'];
const env = await openExport(dir, { objectStorage: JSON.parse(process.env.ORDERLY_TEST_S3!) });
process.stdout.write('STARTED\n');
// The core's timers do not hold the process open; in "run" mode it lives until it is killed.
if (mode === 'run') setInterval(() => undefined, 60_000);
if (mode === 'drain') {
  const runner = env.exports.runner('crash-sub')!;
  const timer = setInterval(() => {
    if (runner.outstanding < env.core.metrics('crash-sub').backlogMessages) return;
    clearInterval(timer);
    void env.close().then(async () => {
      process.stdout.write('DONE\n');
      process.exit(0);
    });
  }, 50);
}
