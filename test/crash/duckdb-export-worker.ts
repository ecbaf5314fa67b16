/**
 * Child process for the DuckDB export crash test: runs the export of `crash-sub` into DuckDB and exits
 * with "DONE" once the backlog is empty. The parent kills it with SIGKILL at random moments before that.
 */
import { openExport } from '../helpers/export.js';

const dir = process.argv[2]!;
const env = await openExport(dir);
process.stdout.write('STARTED\n');
const timer = setInterval(() => {
  if (env.core.metrics('crash-sub').backlogMessages > 0) return;
  clearInterval(timer);
  void env.close().then(() => {
    process.stdout.write('DONE\n');
    process.exit(0);
  });
}, 50);
