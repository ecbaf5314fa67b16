import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, Gauge, Registry } from 'prom-client';
import type { ExportManager } from '../connector/export-manager.js';
import type { ExportRunner } from '../connector/export-runner.js';
import { counterMetrics, exportSection } from '../connector/registry.js';
import { SUBSCRIPTION_STATES } from '../core/consumer.js';
import type { PubSubCore } from '../core/pubsub-core.js';
import { projectOf, shortId } from '../core/names.js';
import { bearerCheck, UNAUTHENTICATED_MESSAGE } from '../api/bearer-auth.js';
import { localHostPort } from '../api/exposure.js';
import type { ExportStates } from './export-states.js';
import { unexpectedErrorCount } from './unexpected-errors.js';

/**
 * A remote export's row: what this worker sees of it. Pub/Sub's v1 API reports no backlog (Cloud
 * Monitoring does), so `backlog` is what this worker holds: delivered to it and not yet acked.
 */
function remoteRow(subscription: string, runner: ExportRunner) {
  return {
    subscription,
    worker: runner.workerId,
    /** The remote endpoint, and whether the worker is streaming from it (or why not). */
    source: runner.sourceStatus(),
    sourceRetryAt: runner.stats.sourceRetryAt,
    state: runner.stats.state,
    stateReason: runner.stats.stateReason,
    /** Set while another worker holds the sink (a DuckDB file) and this one waits to take over. */
    standby: runner.stats.standby,
    backlog: runner.outstanding,
    keysInFlight: runner.keysInFlight(),
    lastCommitAt: runner.stats.lastCommitAt,
    exportStalled: runner.stats.stalled,
    exported: runner.stats.written,
    exportErrors: runner.stats.errors,
    lastExportError: runner.stats.lastError,
    exportRefused: runner.stats.failed,
    lastExportRefusal: runner.stats.lastRefusal,
    /** The most deliveries the worker holds unsettled (`backlog`'s limit: remote.flowControl.maxMessages, or the connector's). */
    exportBudget: runner.budget,
    exportCounters: runner.connectorCounters,
  };
}

export type RemoteStatus = ReturnType<typeof remoteRow>;

/** A fleet worker's remote exports: what `orderly status` shows per worker (and /status, after the local rows). */
export function remoteStatusOf(exports: ExportManager): RemoteStatus[] {
  return [...exports.remoteExports()].map(([name, runner]) => remoteRow(name, runner));
}

/** Ordering keys with the largest backlogs in a status row. */
export const HOT_KEYS = 5;

/**
 * Per subscription (every project), read once: the /status row and the delivery counters. With no export
 * running (`kept`: status of a stopped job), an export's state is the one the job last saw its sink in:
 * the core starts every subscription ACTIVE, which is not what a table it could not write to is.
 */
function snapshot(core: PubSubCore, exports?: ExportManager, kept?: ExportStates) {
  const now = core.clock.now();
  return core.allSubscriptions().map((s) => {
    const m = core.metrics(s.name, HOT_KEYS);
    const runner = exports?.runner(s.name);
    const last = kept && exportSection(s) ? kept.of(s.name, core.identity(s.name).uid) : undefined;
    const status = {
      subscription: s.name,
      topic: s.topic,
      state: last?.state ?? s.state,
      /** Detached from its topic (DetachSubscription): it receives nothing, whatever its state says. */
      detached: s.detached,
      /** Why the export sink is not ACTIVE (its error), while it is not. */
      stateReason: runner?.stats.stateReason ?? last?.reason,
      ordered: s.enableMessageOrdering,
      backlog: m.backlogMessages,
      /**
       * retainAckedMessages: how long (s) its acked messages stay in the store for a seek, out of its backlog
       * (its messageRetentionDuration); 0 when it keeps none.
       */
      keepsAckedSeconds: s.retainAckedMessages ? s.messageRetentionDuration : 0,
      oldestUnackedAgeSeconds: m.oldestUnackedPublishTime === undefined ? 0 : Math.max(0, (now - m.oldestUnackedPublishTime) / 1000),
      hotKeys: m.topKeys,
      delivered: m.counters.delivered,
      acked: m.counters.acked,
      nacked: m.counters.nacked,
      /** Messages dropped unacked past messageRetentionDuration: never exported, if the subscription exports. */
      retentionExpired: m.counters.retentionExpired,
      /** Why a delivery was last nacked, when the nack said (a push endpoint's answer, the export sink's refusal). */
      lastNackReason: m.lastNackReason,
      /** While push requests have been out unanswered for push.stallSeconds (30 s) or more (the endpoint took them and hangs). */
      pushStalled: core.pushStalled(s.name),
      exported: runner?.stats.written ?? 0,
      /** Unexpected failures of the export sink (each reopened it), and the last one, kept after recovery. */
      exportErrors: runner?.stats.errors ?? 0,
      lastExportError: runner?.stats.lastError,
      /** Messages the sink refused (each nacked: delivered again, or dead-lettered), and the last refusal. */
      exportRefused: runner?.stats.failed ?? 0,
      lastExportRefusal: runner?.stats.lastRefusal,
      lastCommitAt: runner?.stats.lastCommitAt,
      /** While a call of the export connector has not returned for 30 s or more: which, and for how long. */
      exportStalled: runner?.stats.stalled,
      /** While the export waits for another process to release its sink (a DuckDB file): which, and who holds it. */
      standby: runner?.stats.standby,
      /** Payload bytes this subscription holds in memory, of the limit all subscriptions share (memory.payloadBytes). */
      residentBytes: m.residentBytes,
      payloadLimitBytes: core.memoryUse().payloadLimit,
      /** Messages it holds in memory, of its read-ahead window (memory.messagesPerSubscription, or an export's smaller one). */
      heldMessages: m.heldMessages,
      windowMessages: m.windowMessages,
      /** The most deliveries its export runner holds unsettled (memory.exportMessages, or its connector's), while one runs. */
      exportBudget: runner?.budget,
      /** The export connector's own running totals (rows appended, objects written, ...), when it keeps them. */
      exportCounters: runner?.connectorCounters,
    };
    return { status, counters: m.counters, connector: exportSection(s)?.connector };
  });
}

type Snapshot = ReturnType<typeof snapshot>[number];

/** Per subscription: what `orderly status` and the /status endpoint show (`kept`: see snapshot). */
export function statusOf(core: PubSubCore, exports?: ExportManager, kept?: ExportStates) {
  return snapshot(core, exports, kept).map((s) => s.status);
}

/**
 * Messages a running job's status or scrape may read to count what snapshots keep (what was published
 * since into those counted, then the first counts of the others), a step on the event loop: measured on a
 * 200,000 message store of 1 KB payloads, 15-25 ms per 25,000 warm, up to 80 ms cold under load (the whole
 * store at once took 340 ms), so 10,000 stays within #12's 50 ms. A snapshot of a million messages is
 * counted over 100 scrapes, never in one.
 */
export const SNAPSHOT_COUNT_BUDGET = 10_000;

/**
 * Every live snapshot (every project's): what it keeps in the store — its topic's messages from its
 * oldest unacked one on, also once the subscriptions drained them — and when it expires and lets them go.
 * `budget`: see SNAPSHOT_COUNT_BUDGET (Infinity: a one-off report counts them whole).
 */
export function snapshotStatusOf(core: PubSubCore, budget: number) {
  return core.snapshotHoldings(budget).map((s) => ({
    snapshot: s.name,
    topic: s.topic,
    expireTime: new Date(s.expireTime).toISOString(),
    heldMessages: s.messages,
    heldBytes: s.bytes,
    /** True while its first count is under way (a job that just started): the held figures are what was counted so far. */
    counting: !s.counted,
  }));
}

export type SnapshotStatus = ReturnType<typeof snapshotStatusOf>[number];

type MetricKind = 'gauge' | 'counter';
/** One series of a metric: its labels and value. */
type Series = [labels: Record<string, string>, value: number];

/**
 * A metric whose series are read from the live state at each scrape. Running totals are counters (TYPE
 * counter), so rate() and increase() read them as such: each scrape sets the live total, and a total that
 * starts again (a restart, a subscription created again) is a counter reset, which Prometheus expects.
 */
function scraped(
  registry: Registry,
  kind: MetricKind,
  metric: { name: string; help: string; labelNames: string[] },
  series: () => Series[],
): void {
  const options = { ...metric, registers: [registry] };
  if (kind === 'gauge')
    new Gauge({
      ...options,
      collect() {
        this.reset();
        for (const [labels, value] of series()) this.set(labels, value);
      },
    });
  else
    new Counter({
      ...options,
      collect() {
        this.reset();
        for (const [labels, value] of series()) this.inc(labels, value);
      },
    });
}

/** Connections the metrics server holds at once; more are refused. */
const METRICS_MAX_CONNECTIONS = 100;
/** A request to the metrics server must arrive whole within this time. */
const METRICS_REQUEST_TIMEOUT_MS = 10_000;
/** A metrics connection that does nothing this long is closed. */
const METRICS_IDLE_TIMEOUT_MS = 30_000;

/**
 * Prometheus metrics (computed from the live state at each scrape) and /status as JSON, served on
 * 127.0.0.1 by default.
 */
export async function serveMetrics(
  core: PubSubCore,
  exports: ExportManager,
  host: string,
  port: number,
  /** When set, every request must carry `authorization: Bearer <authToken>` (401 otherwise). */
  authToken?: string,
): Promise<{ url: string; close(): Promise<void> }> {
  const authorized = authToken === undefined ? undefined : bearerCheck(authToken);
  const registry = new Registry();
  // The default project's subscriptions and topics by id, as before; another project's by full name (ids can repeat).
  const label = (name: string) => (projectOf(name) === core.projectId ? shortId(name) : name);
  // Each scrape reads the live state once (a backlog scan per subscription); every metric uses that.
  let current: Snapshot[] = [];
  let remote: RemoteStatus[] = [];
  let snapshots: SnapshotStatus[] = [];
  // A value left undefined (an export's figure, of a subscription that runs no export) is no series.
  const perSubscription = (kind: MetricKind) => (name: string, help: string, value: (s: Snapshot) => number | undefined) =>
    scraped(registry, kind, { name, help, labelNames: ['subscription'] }, () =>
      current.flatMap((s): Series[] => {
        const v = value(s);
        return v === undefined ? [] : [[{ subscription: label(s.status.subscription) }, v]];
      }),
    );
  const gauge = perSubscription('gauge');
  const counter = perSubscription('counter');
  gauge('orderly_backlog_messages', 'Unacked messages per subscription', (s) => s.status.backlog);
  gauge(
    'orderly_keeps_acked_seconds',
    'How long the subscription keeps its acked messages in the store (retainAckedMessages: its messageRetentionDuration); 0 when it keeps none',
    (s) => s.status.keepsAckedSeconds,
  );
  gauge('orderly_oldest_unacked_message_age_seconds', 'Age of the oldest unacked message', (s) => s.status.oldestUnackedAgeSeconds);
  gauge(
    'orderly_resident_payload_bytes',
    'Payload bytes held in memory (the rest of the backlog is read from the store)',
    (s) => s.status.residentBytes,
  );
  gauge(
    'orderly_held_messages',
    'Messages held in memory (at most the window, once what was read before a smaller one drained)',
    (s) => s.status.heldMessages,
  );
  gauge(
    'orderly_window_messages',
    "Messages the subscription reads ahead into memory: memory.messagesPerSubscription, or an export's smaller window",
    (s) => s.status.windowMessages,
  );
  gauge(
    'orderly_export_budget_messages',
    "The most deliveries the export runner holds unsettled (memory.exportMessages, or its connector's); no series without a running export",
    (s) => s.status.exportBudget,
  );
  counter(
    'orderly_delivered_total',
    'Deliveries (including redeliveries, and ones given back because their answer could not be sent)',
    (s) => s.counters.delivered,
  );
  counter('orderly_redelivered_total', 'Redeliveries', (s) => s.counters.redelivered);
  counter('orderly_acked_total', 'Acks', (s) => s.counters.acked);
  counter('orderly_nacked_total', 'Nacks', (s) => s.counters.nacked);
  counter('orderly_expired_total', 'Lease expiries', (s) => s.counters.expired);
  counter(
    'orderly_retention_expired_total',
    'Messages dropped unacked because they passed the subscription messageRetentionDuration',
    (s) => s.counters.retentionExpired,
  );
  counter('orderly_dead_lettered_total', 'Messages forwarded to the dead-letter topic', (s) => s.counters.deadLettered);
  counter(
    'orderly_exported_total',
    "Messages acked as held by the export sink; a redelivery of one it already held (a seek back, a crash) counts again: the connectors' own counters (rows_appended, objects_written) count what they wrote",
    (s) => s.status.exported,
  );
  counter(
    'orderly_export_errors_total',
    'Unexpected failures of the export sink (each one reopened it after a backoff)',
    (s) => s.status.exportErrors,
  );
  gauge(
    'orderly_export_stalled',
    'Whether a call of the export connector (write, flush, open), or its background work (an upload), has not returned for 30 s or more',
    (s) => (s.status.exportStalled ? 1 : 0),
  );
  gauge(
    'orderly_push_stalled',
    'Whether push requests of the subscription have been out unanswered for push.stallSeconds (default 30 s) or more (the endpoint took them and hangs)',
    (s) => (s.status.pushStalled ? 1 : 0),
  );
  gauge('orderly_export_standby', '1 while the export waits for another process to release its sink (a DuckDB file), else 0', (s) =>
    s.status.standby ? 1 : 0,
  );
  counter(
    'orderly_export_refused_total',
    'Messages the export sink refused (nacked: delivered again, or dead-lettered past maxDeliveryAttempts)',
    (s) => s.status.exportRefused,
  );
  // The connectors' declared counters (ConnectorFactory.counters); 0 for subscriptions whose connector has none.
  for (const { metric, help, counterOf } of counterMetrics()) {
    counter(metric, help, (s) => {
      const counter = s.connector === undefined ? undefined : counterOf[s.connector];
      return counter === undefined ? 0 : (s.status.exportCounters?.[counter] ?? 0);
    });
  }
  // A fleet worker's own view of each remote export, labelled by worker (every worker of a fleet reports its share).
  const perWorker = (kind: MetricKind) => (name: string, help: string, value: (r: RemoteStatus) => number) =>
    scraped(registry, kind, { name, help, labelNames: ['subscription', 'worker'] }, () =>
      remote.map((r) => [{ subscription: r.subscription, worker: r.worker ?? '' }, value(r)]),
    );
  const workerGauge = perWorker('gauge');
  perWorker('counter')('orderly_worker_exported_total', 'Messages this worker wrote for a remote export', (r) => r.exported);
  workerGauge(
    'orderly_worker_keys_in_flight',
    'Ordering keys with messages this worker holds unacked (remote exports)',
    (r) => r.keysInFlight,
  );
  workerGauge('orderly_worker_held_messages', 'Messages delivered to this worker and not yet acked (remote exports)', (r) => r.backlog);
  workerGauge('orderly_worker_streaming', '1 while this worker streams from the remote subscription, else 0', (r) =>
    r.source.state === 'streaming' ? 1 : 0,
  );
  workerGauge('orderly_worker_standby', '1 while this worker waits for another to release the sink (a DuckDB file)', (r) =>
    r.standby ? 1 : 0,
  );
  workerGauge('orderly_worker_last_commit_timestamp_seconds', 'When this worker last acked messages durable at the sink (0: never)', (r) =>
    r.lastCommitAt ? Date.parse(r.lastCommitAt) / 1000 : 0,
  );
  // A snapshot's held figures appear once its first count is done: a partial count is not what it keeps.
  const perSnapshot = (name: string, help: string, value: (s: SnapshotStatus) => number | undefined) =>
    scraped(registry, 'gauge', { name, help, labelNames: ['snapshot', 'topic'] }, () =>
      snapshots.flatMap((s): Series[] => {
        const v = value(s);
        return v === undefined ? [] : [[{ snapshot: label(s.snapshot), topic: label(s.topic) }, v]];
      }),
    );
  perSnapshot(
    'orderly_snapshot_held_messages',
    "Messages a snapshot keeps in the store (its topic's, from its oldest unacked one on), whether or not a subscription still needs them",
    (s) => (s.counting ? undefined : s.heldMessages),
  );
  perSnapshot('orderly_snapshot_held_bytes', 'Payload bytes of the messages a snapshot keeps in the store', (s) =>
    s.counting ? undefined : s.heldBytes,
  );
  perSnapshot(
    'orderly_snapshot_expire_timestamp_seconds',
    'When a snapshot expires and lets go of the messages it keeps',
    (s) => Date.parse(s.expireTime) / 1000,
  );
  scraped(
    registry,
    'gauge',
    {
      name: 'orderly_payload_memory_limit_bytes',
      help: 'Payload bytes all subscriptions may hold in memory together (memory.payloadBytes)',
      labelNames: [],
    },
    () => [[{}, core.memoryUse().payloadLimit]],
  );
  scraped(
    registry,
    'counter',
    {
      name: 'orderly_compacted_messages_total',
      help: 'Messages compaction deleted from the store since start (acked by every subscription of their topic, or past retention)',
      labelNames: [],
    },
    () => [[{}, core.storeUse().compactedMessages]],
  );
  scraped(
    registry,
    'gauge',
    {
      name: 'orderly_store_disk_bytes',
      help: 'Bytes the store takes on disk (database and write-ahead log); falls as compaction gives a drained backlog back',
      labelNames: [],
    },
    () => {
      const bytes = core.storeUse().diskBytes;
      return bytes === undefined ? [] : [[{}, bytes]];
    },
  );
  scraped(
    registry,
    'counter',
    { name: 'orderly_published_total', help: 'Messages published per topic since start', labelNames: ['topic'] },
    () => [...core.published].map(([topic, n]) => [{ topic: label(topic) }, n]),
  );
  scraped(
    registry,
    'gauge',
    { name: 'orderly_subscription_state', help: 'Subscription state (1 for the current one)', labelNames: ['subscription', 'state'] },
    () =>
      current.flatMap(({ status: s }) =>
        SUBSCRIPTION_STATES.map((state): Series => [{ subscription: label(s.subscription), state }, s.state === state ? 1 : 0]),
      ),
  );
  scraped(
    registry,
    'counter',
    {
      name: 'orderly_unexpected_errors_total',
      help: 'Unhandled rejections and uncaught exceptions the process survived (each is logged with its stack)',
      labelNames: [],
    },
    () => [[{}, unexpectedErrorCount()]],
  );
  const failed = (res: ServerResponse, e: unknown) => {
    if (res.headersSent) res.destroy(e as Error);
    else res.writeHead(500, { 'content-type': 'text/plain' }).end(`reading the state failed: ${(e as Error).message}\n`);
  };
  // Scrapers hold a connection or two: a cap, and a silent or half-sent request is closed, as the endpoint's are.
  const server: Server = createServer(
    { headersTimeout: METRICS_REQUEST_TIMEOUT_MS, requestTimeout: METRICS_REQUEST_TIMEOUT_MS },
    (req, res) => {
      try {
        // The path alone: a scraper may add a query string (a scrape config's params).
        const path = (req.url ?? '').split('?')[0];
        if (authorized && !authorized(req.headers.authorization)) {
          res.writeHead(401, { 'content-type': 'text/plain', 'www-authenticate': 'Bearer' }).end(`${UNAUTHENTICATED_MESSAGE}\n`);
        } else if (path === '/metrics') {
          current = snapshot(core, exports);
          remote = remoteStatusOf(exports);
          snapshots = snapshotStatusOf(core, SNAPSHOT_COUNT_BUDGET);
          registry.metrics().then(
            (body) => res.writeHead(200, { 'content-type': registry.contentType }).end(body),
            (e: unknown) => failed(res, e),
          );
        } else if (path === '/status') {
          // The body first: a read that throws must answer 500, not throw again after the 200 header was sent.
          const body = JSON.stringify([
            ...statusOf(core, exports),
            ...snapshotStatusOf(core, SNAPSHOT_COUNT_BUDGET),
            ...remoteStatusOf(exports),
          ]);
          res.writeHead(200, { 'content-type': 'application/json' }).end(body);
        } else res.writeHead(404).end();
      } catch (e) {
        failed(res, e);
      }
    },
  );
  server.maxConnections = METRICS_MAX_CONNECTIONS;
  server.setTimeout(METRICS_IDLE_TIMEOUT_MS, (socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => {
    // A port in use fails the job's start (as the endpoint's does), instead of an uncaught error later.
    server.once('error', (e: Error) =>
      reject(new Error(`the metrics server cannot listen on ${host}:${port} (metrics.host, metrics.port): ${e.message}`, { cause: e })),
    );
    server.listen(port, host, resolve);
  });
  // The URL `orderly status` reads: bracketed when IPv6 (http://[::1]:9464), loopback for a bind to every interface.
  const url = `http://${localHostPort(host, (server.address() as AddressInfo).port)}`;
  return { url, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}
