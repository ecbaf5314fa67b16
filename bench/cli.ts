/**
 * CLI start-up as a user sees it: the wall clock of whole `node bin/orderly.js ...` processes (spawn to
 * exit), whatever bin/orderly.js runs (the build in dist/ when there is one, as `npm run bench` makes). One untimed run first
 * (file system cache), then BENCH_CLI_RUNS (default 10) timed runs each; median and worst.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { performance } from 'node:perf_hooks';
import { orderlyBin as bin, orderlyNode, repoRoot as repo } from './paths.js';
import { fmt, type BenchOutput, type Check } from './report.js';

const RUNS = Math.max(1, Number(process.env.BENCH_CLI_RUNS ?? 10));

const COMMANDS: { args: string[]; targetSeconds: number }[] = [
  { args: ['--help'], targetSeconds: 0.4 },
  { args: ['validate', 'fixtures/demo/job.yaml'], targetSeconds: 0.8 },
];

/** One whole process, in seconds; a failing command is an error, not a figure. */
async function runOnce(args: string[]): Promise<number> {
  const start = performance.now();
  // No loader flags of the benchmark's own process: the CLI starts as `npx orderly` would start it (with the flags bin/orderly.js execs node with).
  const child = spawn(process.execPath, [...orderlyNode.flags, bin, ...args], { cwd: repo, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  const seconds = (performance.now() - start) / 1000;
  if (code !== 0) throw new Error(`orderly ${args.join(' ')} exited with ${code}: ${stderr}`);
  return seconds;
}

export async function benchCli(): Promise<BenchOutput> {
  const rows: string[][] = [];
  const checks: Check[] = [];
  for (const { args, targetSeconds } of COMMANDS) {
    await runOnce(args);
    const times: number[] = [];
    for (let i = 0; i < RUNS; i++) times.push(await runOnce(args));
    times.sort((a, b) => a - b);
    const median = RUNS % 2 ? times[(RUNS - 1) / 2]! : (times[RUNS / 2 - 1]! + times[RUNS / 2]!) / 2;
    const worst = times[RUNS - 1]!;
    const command = `orderly ${args.join(' ')}`;
    rows.push([`\`${command}\``, fmt.s(median), fmt.s(worst), fmt.s(times[0]!), `< ${targetSeconds} s`]);
    checks.push({ target: `\`${command}\` median < ${targetSeconds} s`, measured: fmt.s(median), pass: median < targetSeconds });
  }
  const header = ['command', 'median', 'worst', 'best', 'target (median)'];
  return { tables: [{ title: `${RUNS} timed runs each, after one untimed`, header, numeric: [1, 2, 3], rows }], checks };
}
