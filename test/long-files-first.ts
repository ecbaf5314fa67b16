import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The suite's longest files, slowest first (a whole run's file durations on the 2-core machine). On a
 * clean clone (CI) vitest knows no durations of a previous run and starts the largest files first: the
 * SIGKILL soak, small and the longest but two, started in the run's last tenth and the other worker idled
 * while it ran. Longest first leaves the short files to even out the two workers' ends.
 */
const LONG_FILES = [
  'test/cli/cli.test.ts',
  'test/cli/query-read-only.test.ts',
  'test/faults/sigkill-soak.test.ts',
  'test/api/endpoint-security.test.ts',
  'test/crash/duckdb-export-crash.test.ts',
  'test/fleet/fleet-duckdb-export.test.ts',
  'test/faults/api-fuzz.test.ts',
  'test/fleet/fleet-object-export.test.ts',
  'test/fleet/remote-seek.test.ts',
  'test/crash/object-export-crash.test.ts',
  'test/crash/core-crash.test.ts',
  'test/fleet/stop-endpoint-gone.test.ts',
  'test/package/pack-and-install.test.ts',
  'test/fleet/standby-stand-down.test.ts',
];

/** vitest's order (a previous run's durations, else size), with the files known to be long first. */
export class LongFilesFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (file: TestSpecification) => {
      const at = LONG_FILES.indexOf(relative(this.ctx.config.root, file.moduleId));
      return at < 0 ? LONG_FILES.length : at;
    };
    return (await super.sort(files)).sort((a, b) => rank(a) - rank(b));
  }
}
