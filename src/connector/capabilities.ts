import type { SubscriptionIdentity } from '../core/pubsub-core.js';
import type { ConnectorSettings } from './connector.js';

/**
 * What a capability is given: one export subscription of the connector's type, and the job's settings.
 * @typeParam Config the export section, as the factory's `parseConfig` returns it
 */
export interface ExportTarget<Config = unknown> {
  /** The subscription's full name. */
  subscription: string;
  /** Its uid: what the connector keyed its progress and files by. */
  identity: SubscriptionIdentity;
  /** Its export section, as the factory's `parseConfig` returned it. */
  config: Config;
  /** The same settings its connectors are given. */
  settings: ConnectorSettings;
  /**
   * The subscription's filter, when it has one: each ordering key's sequences then skip the messages it
   * refused (acked, never delivered), so a gap between a key's sequences in the sink is no loss.
   */
  filter?: string;
  /**
   * Exported by a fleet of workers (a remote Pub/Sub subscription; see `ConnectorContext.fleet`): what they
   * wrote is described by the sink itself (a manifest in the bucket), not by this machine's files.
   */
  shared?: boolean;
  /**
   * A fleet's export that does not ask for per-key order (its `enableMessageOrdering` left out or false):
   * its subscription may deliver a key's messages in any order (and a seek back replays earlier ones after
   * later ones), so a key going back in publish time inside an object is information, not a failure.
   */
  unordered?: boolean;
}

/**
 * What a connector's exports run with where the job file's `memory` section does not say (a setting the
 * file gives wins over it): a sink that takes memory of the exporting process itself (DuckDB's buffers and
 * checkpoints) leaves itself room with less read ahead of it and a tighter JavaScript heap.
 */
export interface ExportMemory {
  /** The subscription's window, in messages (memory.messagesPerSubscription); never above the core's. */
  windowMessages?: number;
  /** The runner's budget of unsettled messages (memory.exportMessages). */
  exportMessages?: number;
  /**
   * V8's heap growth (memory.heapGrowthPercent), for the whole process once such an export runs: the
   * lowest any export started asks for holds from then on.
   */
  heapGrowthPercent?: number;
}

/** One check of an order audit: how many problems it found, and a few of them. */
export interface AuditCheck {
  /** What is checked, e.g. "missing sequences". */
  label: string;
  /** How many problems it found. */
  count: number;
  /** A few of them, each naming the key and where. */
  examples: string[];
  /** Whether a count above 0 fails the audit (`orderly audit` exits 1); otherwise it is information. */
  failing: boolean;
}

/** What `orderly audit` prints: a summary line and the checks, or with --json the connector's whole `report`. */
export interface AuditResult {
  /** What was read, in one line (e.g. "objects 3, records 320, keys 13"). */
  summary: string;
  /** The checks, in the order they are printed. */
  checks: AuditCheck[];
  /** The connector's own report, printed as it is by `orderly audit --json`. */
  report: object;
}

/**
 * A DuckDB view `orderly query` creates over what one subscription exported. Read-only queries may read
 * `files` and nothing else on disk.
 */
export interface QueryView {
  /** Local files the view reads. */
  files: string[];
  /** The view's SELECT, in DuckDB SQL (quote file names with `quoteString` from `orderly/connector`). */
  select: string;
  /** What the sink holds that the view does not read, and why: `orderly query` says so beside the answer. */
  leftOut?: string;
}

/** How a counter in `Connector.counters` is exported to Prometheus. */
export interface CounterMetric {
  /** The metric's name, e.g. `orderly_rows_appended_total`; one gauge per name, labelled by subscription. */
  metric: string;
  /** The metric's help text. */
  help: string;
}
