import type { PubSub } from '@google-cloud/pubsub';
import { InvalidArgumentError, OrderlyError } from '../core/errors.js';
import type { PubSubCore, SubscriptionIdentity } from '../core/pubsub-core.js';
import type { SubscriptionState } from '../core/consumer.js';
import type { SubscriptionSpec } from '../core/subscription-config.js';
import type { Logger } from '../log.js';
import { Backoff } from './backoff.js';
import type { Connector, ConnectorContext, ConnectorSettings } from './connector.js';
import { DEFAULT_BUDGET, ExportRunner, type ExportRunnerOptions } from './export-runner.js';
import type { ExportMemory } from './capabilities.js';
import { declaredMemory, exportSection, getConnector } from './registry.js';
import { EmbeddedSource } from './sources/embedded-source.js';
import type { RemoteEndpoint } from './sources/remote-endpoint.js';
import { remoteIdentity, remoteSubscriptionName } from './sources/remote-names.js';
import type { ExportSection } from './sources/remote-source.js';

/**
 * The remote sources' modules, loaded only for a job with remote exports: they load Google's Pub/Sub
 * client (and gRPC), about 40 MiB of RSS and half a second that an export of the embedded core never uses.
 */
async function loadRemoteSources() {
  const [endpoint, source] = await Promise.all([import('./sources/remote-endpoint.js'), import('./sources/remote-source.js')]);
  return { ...endpoint, RemoteSource: source.RemoteSource };
}
type RemoteSources = Awaited<ReturnType<typeof loadRemoteSources>>;

type RunnerTuning = Partial<
  Pick<
    ExportRunnerOptions,
    'maxBatchMessages' | 'maxOutstandingMessages' | 'maxOutstandingBytes' | 'flushIntervalMs' | 'standbyRetryMs' | 'stallMs'
  >
>;

/** Exports a fleet of workers runs from subscriptions on a remote Pub/Sub endpoint (the job's `remote:` section). */
export interface RemoteExports extends RemoteEndpoint {
  /** This worker's id (status, metrics, object manifests). */
  workerId: string;
  /** How long the client keeps extending a held message's lease, in minutes. */
  maxExtensionMinutes: number;
  /** StreamingPull streams per export. */
  streams: number;
  /** Exports of ordered subscriptions: seconds without a delivery after which a worker finalizes what it holds (0: never; see ExportRunnerOptions.idleFlushMs). */
  idleFlushSeconds: number;
  exports: {
    /** A bare id (in `projectId`) or a full name. */
    subscription: string;
    /** Ask for per-key order: a remote subscription with ordering off is refused. */
    enableMessageOrdering: boolean;
    section: ExportSection;
  }[];
}

export interface ExportManagerOptions {
  core: PubSubCore;
  settings: ConnectorSettings;
  logger: Logger;
  /**
   * Passed to every runner (batch sizes, flush interval); mostly for tests and benchmarks. A budget given
   * here (the job file's memory.exportMessages) wins over the connector's (ExportMemory.exportMessages).
   */
  runner?: RunnerTuning & { backoff?: () => Backoff };
  /**
   * The window of every embedded export's subscription when the job file sets one
   * (memory.messagesPerSubscription); unset, each connector's (ExportMemory.windowMessages), else the core's.
   */
  windowMessages?: number;
  /** Exports from a remote Pub/Sub, besides the core's export subscriptions. */
  remote?: RemoteExports;
  /** Told each embedded export's sink state as it changes (ExportRunnerOptions.onState), by subscription and uid. */
  onState?: (subscription: string, uid: string, state: SubscriptionState, reason: string | undefined) => void;
  /** Told before a runner (embedded or remote) starts, with what its connector declares it runs with. */
  onRunnerStart?: (memory: ExportMemory) => void;
}

/**
 * Keeps one export runner per export subscription (bigqueryConfig, cloudStorageConfig, exportConfig) of
 * the core, in every project, and one per remote export of the job. After `start()` it follows the core:
 * an export section is validated by its connector when a subscription is created or updated (a bad one is
 * refused there), and a created, changed or deleted export subscription starts, restarts or stops its
 * runner — whichever API made the change. A subscription created again under the same name is another
 * uid: a new runner, new sink state.
 */
export class ExportManager {
  /** Per subscription: the uid and export section its runner was started for. */
  private readonly runners = new Map<string, { uid: string; section: string; runner: ExportRunner }>();
  /** Remote exports' runners, by remote subscription name. */
  private readonly remoteRunners = new Map<string, ExportRunner>();
  private remoteClient?: PubSub;
  /** Set once start() found remote exports (see loadRemoteSources). */
  private remoteSources?: RemoteSources;
  /** Syncs run one after another: two at once could both start a runner for the same subscription. */
  private syncing: Promise<void> = Promise.resolve();
  private following: (() => void)[] = [];
  /**
   * Runners stopping for good (their subscription deleted, detached or no longer exporting). A sync does
   * not wait for them, so a connector call that never returns holds up only its own subscription.
   */
  private readonly retiring = new Set<Promise<void>>();

  constructor(private readonly options: ExportManagerOptions) {}

  /** Starts the runners of the current export subscriptions and follows the core's changes from now on. */
  async start(): Promise<void> {
    const { core, logger } = this.options;
    this.following = [
      core.addSubscriptionValidator((name, spec) => this.checkExport(name, spec)),
      core.onSubscriptionChange(() => {
        this.sync().catch((e: unknown) => logger.error({ error: (e as Error).message }, 'starting or stopping an export failed'));
      }),
    ];
    await this.sync();
    if (this.options.remote?.exports.length) this.startRemote((this.remoteSources ??= await loadRemoteSources()));
  }

  /**
   * Loads the code of every export's connector (ConnectorFactory.load), embedded and remote, and starts
   * nothing: a job calls it before its exports start and its endpoint serves, so the synchronous compile
   * of a database driver, a cloud SDK or the Pub/Sub client holds up no delivery. Best effort: a config
   * a connector refuses is reported by `start`, code that fails to load by the connector's `open`
   * (retried with backoff).
   */
  async load(): Promise<void> {
    const specs = [
      ...this.options.core.allSubscriptions().filter((sub) => !sub.detached),
      ...(this.options.remote?.exports.map((entry) => entry.section) ?? []),
    ];
    for (const spec of specs) {
      const section = exportSection(spec);
      if (!section) continue;
      try {
        const factory = getConnector(section.connector);
        await factory.load?.(factory.parseConfig(section.config));
      } catch {
        // Reported where it matters (see above).
      }
    }
    if (this.options.remote?.exports.length) this.remoteSources ??= await loadRemoteSources();
  }

  /**
   * Validates every new export subscription's config (and makes its first connector) first, so a bad one
   * starts nothing.
   */
  sync(): Promise<void> {
    const next = this.syncing.then(() => this.syncNow());
    this.syncing = next.catch(() => undefined);
    return next;
  }

  /**
   * What an export runs with, resolved once for its context, source and runner: what its connector
   * declares, and its runner's budget — the job's, else the connector's, else the default.
   */
  private exportMemory(section: { connector: string; config: unknown }): { memory: ExportMemory; budget: ConnectorContext['budget'] } {
    const memory = declaredMemory(section);
    const tuning = this.options.runner ?? {};
    const budget = {
      messages: tuning.maxOutstandingMessages ?? memory.exportMessages ?? DEFAULT_BUDGET.messages,
      bytes: tuning.maxOutstandingBytes ?? DEFAULT_BUDGET.bytes,
    };
    return { memory, budget };
  }

  /**
   * Refuses a created or updated export subscription its connector cannot work with: the config it refuses,
   * and what it refuses to be made with (a setting this process lacks, such as a DuckDB database for
   * `bigqueryConfig` on a server without one) — found now, not by its runner after the change was accepted.
   * The connector made here is never opened: `create` does no heavy work.
   */
  private checkExport(name: string, spec: SubscriptionSpec): void {
    const section = exportSection(spec);
    if (!section) return;
    const { core } = this.options;
    const identity = core.hasSubscription(name) ? core.identity(name) : { uid: '', adoptsNameKeyedProgress: false };
    try {
      const { budget } = this.exportMemory(section);
      this.connectorMaker(name, identity, spec, {}, { topicSchema: () => core.topicSchema(spec.topic), budget });
    } catch (e) {
      if (e instanceof OrderlyError) throw e;
      // A connector refusing the settings with an error of its own still refuses the request (400), not a server fault.
      throw new InvalidArgumentError(
        section.field,
        `connector "${section.connector}" refused these settings: ${e instanceof Error ? e.message : String(e)}`,
      );
    }
  }

  /** The context of one export's connectors, for the spec they are made for. */
  private context(
    subscription: string,
    identity: SubscriptionIdentity,
    start: { runner?: ExportRunner },
    extra: Pick<ConnectorContext, 'fleet' | 'topicSchema' | 'budget'>,
  ): (spec: SubscriptionSpec) => ConnectorContext {
    const { settings, logger } = this.options;
    return (current) => ({
      subscription,
      identity,
      spec: current,
      logger: logger.child({ subscription }),
      settings,
      notify: () => start.runner?.requestFlush(),
      ...extra,
    });
  }

  /** A connector factory for one export: `first` made now (a setting it refuses fails here), later ones for the spec the source reports. */
  private connectorMaker(
    subscription: string,
    identity: SubscriptionIdentity,
    spec: SubscriptionSpec,
    start: { runner?: ExportRunner },
    extra: Pick<ConnectorContext, 'fleet' | 'topicSchema' | 'budget'>,
  ): (spec: SubscriptionSpec) => Connector {
    const section = exportSection(spec)!;
    const factory = getConnector(section.connector);
    const config = factory.parseConfig(section.config);
    const context = this.context(subscription, identity, start, extra);
    let first: Connector | undefined = factory.create(config, context(spec));
    return (current) => {
      const connector = first ?? factory.create(config, context(current));
      first = undefined;
      return connector;
    };
  }

  private async syncNow(): Promise<void> {
    const { core, logger } = this.options;
    const { backoff, ...tuning } = this.options.runner ?? {};
    const exports = core.allSubscriptions().flatMap((sub) => {
      // A detached subscription receives nothing: its runner stops.
      const section = sub.detached ? undefined : exportSection(sub);
      return section ? [{ sub, section, text: JSON.stringify(section), identity: core.identity(sub.name) }] : [];
    });
    const current = (name: string) => this.runners.get(name);
    const fresh = exports
      .filter(({ sub, identity, text }) => current(sub.name)?.uid !== identity.uid || current(sub.name)?.section !== text)
      .map(({ sub, section, text, identity }) => {
        const { memory, budget } = this.exportMemory(section);
        const start: { runner?: ExportRunner } = {};
        let createConnector: (spec: SubscriptionSpec) => Connector;
        try {
          createConnector = this.connectorMaker(sub.name, identity, sub, start, {
            topicSchema: () => core.topicSchema(sub.topic),
            budget,
          });
        } catch (e) {
          // Stored before this process could refuse it (or under other settings): its runner shows why it
          // cannot run, in the subscription's state, and the other exports run as they would without it.
          createConnector = () => {
            throw e;
          };
        }
        return { sub, identity, text, start, createConnector, memory, budget };
      });
    const wanted = new Map(exports.map(({ sub, identity, text }) => [sub.name, { uid: identity.uid, section: text }]));
    const replaced: Promise<void>[] = [];
    /** Per subscription whose section changed (not created again): the runner whose totals its next one carries on. */
    const previous = new Map<string, ExportRunner>();
    for (const [name, { uid, section, runner }] of this.runners) {
      const next = wanted.get(name);
      if (next?.uid === uid && next.section === section) continue;
      this.runners.delete(name);
      // The same subscription's next runner must not open its sink while this one may still write to it.
      if (next) {
        replaced.push(runner.stop());
        if (next.uid === uid) previous.set(name, runner);
        continue;
      }
      // Said in the log: an export that stops at runtime (its subscription deleted over the API, or its export
      // config removed) otherwise only left /metrics and /status, the log silent about it.
      const why = core.hasSubscription(name) ? 'its subscription no longer exports' : 'its subscription was deleted';
      const stopped = runner
        .stop()
        .then(() => logger.info({ subscription: name, exported: runner.stats.written }, `export stopped: ${why}`))
        .catch((e: unknown) =>
          logger.error({ subscription: name, error: e instanceof Error ? e.message : String(e) }, 'stopping an export failed'),
        )
        .finally(() => {
          this.retiring.delete(stopped);
          this.sinkGone(name, uid);
        });
      this.retiring.add(stopped);
    }
    await Promise.all(replaced);
    for (const { sub, identity, text, start, createConnector, memory, budget } of fresh) {
      const source = new EmbeddedSource(core, sub.name, identity.uid, {
        maxPerKey: tuning.maxBatchMessages ?? 5000,
        windowMessages: this.options.windowMessages ?? memory.windowMessages,
      });
      const continues = previous.get(sub.name)?.totals;
      const { onState } = this.options;
      const runner = new ExportRunner({
        source,
        createConnector,
        logger,
        clock: core.clock,
        ...tuning,
        maxOutstandingMessages: budget.messages,
        backoff,
        continues,
        onState: onState && ((state, reason) => onState(sub.name, identity.uid, state, reason)),
      });
      start.runner = runner;
      this.runners.set(sub.name, { uid: identity.uid, section: text, runner });
      this.options.onRunnerStart?.(memory);
      runner.start();
    }
  }

  /**
   * One runner per remote export, each reading its subscription through one shared client. The connector
   * is made (and its settings checked) now; the subscription's own settings come from the remote once it
   * is reached.
   */
  private startRemote({ createPubSubClient, RemoteSource }: RemoteSources): void {
    const remote = this.options.remote!;
    const { logger } = this.options;
    const { backoff, ...tuning } = this.options.runner ?? {};
    this.remoteClient ??= createPubSubClient(remote);
    for (const entry of remote.exports) {
      const subscription = remoteSubscriptionName(entry.subscription, remote.projectId);
      if (this.remoteRunners.has(subscription)) continue;
      const { memory, budget } = this.exportMemory(exportSection(entry.section)!);
      const start: { runner?: ExportRunner } = {};
      // Until the remote answers, the job's view: checked against the remote's own settings in prepare().
      const assumed: SubscriptionSpec = {
        topic: '',
        ackDeadlineSeconds: 10,
        messageRetentionDuration: 7 * 86400,
        retainAckedMessages: false,
        enableMessageOrdering: entry.enableMessageOrdering,
        filter: '',
        enableExactlyOnceDelivery: false,
        labels: {},
        ...entry.section,
      };
      // A remote topic's schema is not read: the connector gets no topicSchema (useTopicSchema is refused).
      const createConnector = this.connectorMaker(subscription, remoteIdentity(subscription), assumed, start, {
        fleet: { workerId: remote.workerId },
        budget,
      });
      const source = new RemoteSource({
        client: this.remoteClient,
        endpoint: remote,
        subscription,
        ordered: entry.enableMessageOrdering,
        section: entry.section,
        budget,
        maxExtensionMinutes: remote.maxExtensionMinutes,
        streams: remote.streams,
        logger,
        backoff,
      });
      // With ordering, Pub/Sub holds a key's next messages until its earlier ones are acked: the runner flushes
      // idle exports of a subscription that has it on, whether or not the job asks for per-key order.
      const idleFlushMs = remote.idleFlushSeconds > 0 ? remote.idleFlushSeconds * 1000 : undefined;
      const runner = new ExportRunner({
        source,
        createConnector,
        logger,
        workerId: remote.workerId,
        idleFlushMs,
        ...tuning,
        maxOutstandingMessages: budget.messages,
        backoff,
      });
      start.runner = runner;
      this.remoteRunners.set(subscription, runner);
      this.options.onRunnerStart?.(memory);
      runner.start();
    }
  }

  /**
   * A subscription that no longer exports (its export config removed, or detached) has no sink whose state
   * it could be in: ACTIVE again, not the NOT_FOUND or RESOURCE_ERROR its last runner left, for good.
   */
  private sinkGone(name: string, uid: string): void {
    const { core } = this.options;
    if (this.runners.has(name) || !core.hasSubscription(name) || core.identity(name).uid !== uid) return;
    core.setSubscriptionState(name, 'ACTIVE');
  }

  runner(subscription: string): ExportRunner | undefined {
    const remote =
      this.remoteRunners.get(subscription) ??
      (this.options.remote && this.remoteRunners.get(remoteSubscriptionName(subscription, this.options.remote.projectId)));
    if (remote) return remote;
    const { core } = this.options;
    return core.hasSubscription(subscription) ? this.runners.get(core.subscriptionName(subscription))?.runner : undefined;
  }

  /** The runners of remote exports (a fleet worker's share), by remote subscription name. */
  remoteExports(): ReadonlyMap<string, ExportRunner> {
    return this.remoteRunners;
  }

  /** Stops every runner: in-flight writes finish, buffered data is finalized and acked. */
  async stop(): Promise<void> {
    for (const unfollow of this.following) unfollow();
    this.following = [];
    await this.syncing;
    await Promise.all([
      ...[...this.runners.values(), ...this.remoteRunners.values()].map((r) => ('runner' in r ? r.runner : r).stop()),
      ...this.retiring,
    ]);
    this.runners.clear();
    this.remoteRunners.clear();
    await this.remoteClient
      ?.close()
      .catch((e: unknown) => this.options.logger.warn({ error: (e as Error).message }, 'closing the remote Pub/Sub client failed'));
    this.remoteClient = undefined;
  }
}
