import type { AuditResult } from '../connector/capabilities.js';

/** An order audit as text: the summary line, then each check's count and up to two examples. */
export function printAudit(r: AuditResult): void {
  console.log(r.summary);
  for (const c of r.checks)
    console.log(`  ${c.label}: ${c.count}${c.examples.length ? `  e.g. ${c.examples.slice(0, 2).join('; ')}` : ''}`);
}

/** Whether a failing check found anything (`orderly audit` then exits 1). */
export function auditFailed(r: AuditResult): boolean {
  return r.checks.some((c) => c.failing && c.count > 0);
}
