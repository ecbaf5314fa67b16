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

export function report(title: string, results: BenchResult[]): void {
  console.log(`\n## ${title}`);
  console.log('| benchmark | msgs/s | ratio vs baseline | notes |');
  console.log('|---|---:|---:|---|');
  for (const r of results) {
    console.log(`| ${r.name} | ${Math.round(r.perSecond).toLocaleString('en-US')} | ${(r.perSecond / r.baseline).toFixed(2)} | ${r.extra ?? ''} |`);
  }
}
