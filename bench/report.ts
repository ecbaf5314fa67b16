export interface BenchResult {
  name: string;
  perSecond: number;
  /** Same-run baseline the ratio is taken against. */
  baseline: number;
  extra?: string;
}

export async function time(fn: () => Promise<void>): Promise<number> {
  const start = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - start) / 1e9;
}

/**
 * Runs a measurement twice and keeps the second: the first compiles the JavaScript paths (V8's JIT), which
 * a long-running exporter pays once, while the native baselines need no warm-up.
 */
export async function warm<T>(measure: () => Promise<T>): Promise<T> {
  await measure();
  return measure();
}

export function report(title: string, results: BenchResult[]): void {
  console.log(`\n## ${title}`);
  console.log('| benchmark | msgs/s | ratio vs baseline | notes |');
  console.log('|---|---:|---:|---|');
  for (const r of results) {
    console.log(`| ${r.name} | ${Math.round(r.perSecond).toLocaleString('en-US')} | ${(r.perSecond / r.baseline).toFixed(2)} | ${r.extra ?? ''} |`);
  }
}
