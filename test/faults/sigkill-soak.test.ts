import { describe, expect, it } from 'vitest';
import { runSigkillSoak } from './sigkill-soak.js';

/**
 * CI runs 14 kills (a new seed each time; within the suite's 10 minutes); `npm run soak` runs 100
 * (ORDERLY_SOAK_KILLS); ORDERLY_SOAK_SEED repeats a run.
 */
const KILLS = Number(process.env.ORDERLY_SOAK_KILLS ?? 14);
const SEED = Number(process.env.ORDERLY_SOAK_SEED ?? Math.floor(Math.random() * 2 ** 31));
const none = { count: 0, examples: [] };

describe("SIGKILL soak: orderly run exporting to DuckDB and S3 while Google's client publishes", () => {
  it(
    `${KILLS} kills: every confirmed publish exactly once in the table and in the objects, per-key order, clean audit`,
    async () => {
      const report = await runSigkillSoak({
        kills: KILLS,
        seed: SEED,
        log: (line) => process.env.ORDERLY_SOAK_VERBOSE && console.log(line),
      });
      const duplicates = report.table.duplicates.count + report.files.duplicates.count;
      const missing = report.table.missing.count + report.files.missing.count;
      const orderViolations = report.table.orderViolations.count + report.files.orderViolations.count + report.filesRestored.count;
      console.log(
        `soak (seed ${report.seed}): kills ${report.kills}, published ${report.published}, confirmed ${report.confirmed}, rows ${report.rows}, ` +
          `objects ${report.objects} (${report.records} records), duplicates ${duplicates}, missing ${missing}, order violations ${orderViolations}`,
      );
      expect(report.confirmed).toBeGreaterThan(0);
      expect(
        { table: report.table, files: report.files, filesRestored: report.filesRestored, sinksDisagree: report.sinksDisagree },
        `seed ${report.seed}`,
      ).toEqual({
        table: { records: report.rows, duplicates: none, missing: none, orderViolations: none },
        files: { records: report.records, duplicates: none, missing: none, orderViolations: none },
        filesRestored: none,
        sinksDisagree: none,
      });
      expect(report.audit).toEqual({ records: report.records, missing: 0, duplicates: 0, outOfOrderInFile: 0, objectErrors: 0 });
      expect(report.status.map((s) => [s.state, s.backlog])).toEqual([
        ['ACTIVE', 0],
        ['ACTIVE', 0],
      ]);
    },
    // A kill cycle takes a few seconds (most of it the child's start-up); generous for a loaded machine.
    120_000 + KILLS * 15_000,
  );
});
