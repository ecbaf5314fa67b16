export interface BenchResult {
  name: string;
  perSecond: number;
  /** Same-run baseline the ratio is taken against. */
  baseline: number;
  /** The ratio this row must reach (issue targets); rows without one print no verdict. */
  minRatio?: number;
  extra?: string;
}

/** One target of a benchmark: what was measured against what it must be. `pass` undefined = not measured (skipped). */
export interface Check {
  target: string;
  measured: string;
  pass: boolean | undefined;
}

/** A markdown table: header cells, then rows of cells (already formatted). */
export interface Table {
  title?: string;
  header: string[];
  /** Right-aligned columns (numbers), by index. */
  numeric?: number[];
  rows: string[][];
}

/** What a benchmark prints: its tables, then its targets with PASS/FAIL. */
export interface BenchOutput {
  tables: Table[];
  checks: Check[];
}

export async function time(fn: () => Promise<void>): Promise<number> {
  const start = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - start) / 1e9;
}

/**
 * Runs a measurement twice and keeps the second: the first compiles the JavaScript paths (V8's JIT), which
 * a long-running exporter pays once.
 */
export async function warm<T>(measure: () => Promise<T>): Promise<T> {
  await measure();
  return measure();
}

/**
 * A baseline "as fast as it can go": one warm-up run (JIT, file system and DuckDB caches), then the best
 * (highest rate) of `runs` runs, so a baseline slowed by a neighbour's burst does not flatter the ratio.
 */
export async function best(measure: () => Promise<number>, runs = Number(process.env.BENCH_BASELINE_RUNS ?? 3)): Promise<number> {
  await measure();
  let top = 0;
  for (let i = 0; i < runs; i++) top = Math.max(top, await measure());
  return top;
}

/** The p-th percentile (nearest rank) of values sorted ascending; NaN when there are none. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]! : NaN;
}

export const fmt = {
  int: (n: number) => Math.round(n).toLocaleString('en-US'),
  mib: (bytes: number) => `${fmt.int(bytes / 1024 / 1024)} MiB`,
  ms: (ms: number) => (ms < 10 ? `${ms.toFixed(1)} ms` : `${fmt.int(ms)} ms`),
  s: (seconds: number) => `${seconds < 10 ? seconds.toFixed(2) : seconds.toFixed(1)} s`,
  ratio: (r: number) => r.toFixed(2),
};

export function verdict(pass: boolean | undefined): string {
  return pass === undefined ? 'SKIP' : pass ? 'PASS' : 'FAIL';
}

/** The classic throughput table: msgs/s per row and its ratio against the same-run baseline. */
export function ratioTable(results: BenchResult[]): BenchOutput {
  const rows = results.map((r) => {
    const ratio = r.perSecond / r.baseline;
    const target = r.minRatio === undefined ? '' : `≥ ${fmt.ratio(r.minRatio)} ${verdict(ratio >= r.minRatio)}`;
    return [r.name, fmt.int(r.perSecond), fmt.ratio(ratio), target, r.extra ?? ''];
  });
  const checks = results
    .filter((r) => r.minRatio !== undefined)
    .map((r) => {
      const ratio = r.perSecond / r.baseline;
      return { target: `${r.name}: ratio ≥ ${fmt.ratio(r.minRatio!)}`, measured: fmt.ratio(ratio), pass: ratio >= r.minRatio! };
    });
  return { tables: [{ header: ['benchmark', 'msgs/s', 'ratio vs baseline', 'target', 'notes'], numeric: [1, 2], rows }], checks };
}

function printTable(table: Table): void {
  if (table.title) console.log(`${table.title}\n`);
  console.log(`| ${table.header.join(' | ')} |`);
  console.log(`|${table.header.map((_, i) => (table.numeric?.includes(i) ? '---:' : '---')).join('|')}|`);
  for (const row of table.rows) console.log(`| ${row.join(' | ')} |`);
}

export function report(title: string, output: BenchOutput): void {
  console.log(`\n## ${title}`);
  for (const table of output.tables) {
    console.log('');
    printTable(table);
  }
  if (output.checks.length) {
    console.log('');
    printTable({ header: ['target', 'measured', 'verdict'], rows: output.checks.map((c) => [c.target, c.measured, verdict(c.pass)]) });
  }
}

/** Samples RSS while `fn` runs; returns the peak in MiB. */
export async function peakRss<T>(fn: () => Promise<T>): Promise<[T, number]> {
  let peak = process.memoryUsage().rss;
  const timer = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
  try {
    return [await fn(), Math.round(peak / 1024 / 1024)];
  } finally {
    clearInterval(timer);
  }
}
