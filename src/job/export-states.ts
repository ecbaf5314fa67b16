import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { SubscriptionState } from '../core/consumer.js';
import type { Logger } from '../log.js';

/** The file in the data directory that keeps each export subscription's last sink state. */
export const EXPORT_STATES_FILE = 'export-states.json';

/** A sink state as the job last saw it, for the subscription with this uid (one created again has another). */
export interface KeptExportState {
  uid: string;
  state: SubscriptionState;
  reason?: string;
  at: string;
}

/**
 * Each export subscription's last sink state (SCHEMA_MISMATCH, RESOURCE_ERROR, ... or ACTIVE), kept in the
 * data directory as the running job sees it change. The store keeps messages, not what a sink answered:
 * without this, `orderly status` with no job running showed every export ACTIVE, a table it could not
 * write to included.
 */
export class ExportStates {
  private readonly file: string;
  /** Read when first needed: a command that neither exports nor shows status (a query) never opens the file. */
  private kept?: Map<string, KeptExportState>;

  constructor(
    dataDir: string,
    private readonly logger?: Logger,
  ) {
    this.file = join(dataDir, EXPORT_STATES_FILE);
  }

  private get states(): Map<string, KeptExportState> {
    return (this.kept ??= readStates(this.file));
  }

  /** The state kept for `subscription`, if it was kept for this very subscription (`uid`). */
  of(subscription: string, uid: string): KeptExportState | undefined {
    const kept = this.states.get(subscription);
    return kept?.uid === uid ? kept : undefined;
  }

  /** Keeps `state` (written aside and renamed over the file, so a crash leaves the old file or the new one whole). */
  record(subscription: string, uid: string, state: SubscriptionState, reason?: string): void {
    this.states.set(subscription, { uid, state, reason, at: new Date().toISOString() });
    const aside = `${this.file}.${process.pid}.tmp`;
    try {
      writeFileSync(aside, `${JSON.stringify(Object.fromEntries(this.states), null, 1)}\n`);
      renameSync(aside, this.file);
    } catch (e) {
      // Only what status shows while the job is stopped depends on it: the export goes on.
      this.logger?.warn({ file: this.file, error: (e as Error).message }, 'cannot keep the export states for `orderly status`');
    }
  }
}

function readStates(file: string): Map<string, KeptExportState> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    // None yet: no export has run in this data directory since states were kept.
    return new Map();
  }
  try {
    const parsed = JSON.parse(text) as Record<string, KeptExportState>;
    return new Map(Object.entries(parsed).filter(([, s]) => typeof s?.uid === 'string' && typeof s.state === 'string'));
  } catch {
    // A file damaged by hand: the states are rewritten as the job sees them again; nothing else depends on it.
    return new Map();
  }
}
