import type { PubSubCore } from '../core/pubsub-core.js';
import type { Logger } from '../log.js';
import { Backoff } from './backoff.js';
import type { Connector, ConnectorSettings } from './connector.js';
import { DEFAULT_BUDGET, ExportRunner, type ExportRunnerOptions } from './export-runner.js';
import { exportSection, getConnector } from './registry.js';

export interface ExportManagerOptions {
  core: PubSubCore;
  settings: ConnectorSettings;
  logger: Logger;
  /** Passed to every runner (batch sizes, flush interval); mostly for tests and benchmarks. */
  runner?: Partial<Pick<ExportRunnerOptions, 'maxBatchMessages' | 'maxOutstandingMessages' | 'maxOutstandingBytes' | 'flushIntervalMs'>> & {
    backoff?: () => Backoff;
  };
}

/**
 * Keeps one export runner per export subscription (bigqueryConfig, cloudStorageConfig, exportConfig) of
 * the core, in every project. After `start()` it follows the core: an export section is validated by its
 * connector when a subscription is created or updated (a bad one is refused there), and a created,
 * changed or deleted export subscription starts, restarts or stops its runner — whichever API made the
 * change. A subscription created again under the same name is another uid: a new runner, new sink state.
 */
export class ExportManager {
  /** Per subscription: the uid and export section its runner was started for. */
  private readonly runners = new Map<string, { uid: string; section: string; runner: ExportRunner }>();
  /** Syncs run one after another: two at once could both start a runner for the same subscription. */
  private syncing: Promise<void> = Promise.resolve();
  private following: (() => void)[] = [];

  constructor(private readonly options: ExportManagerOptions) {}

  /** Starts the runners of the current export subscriptions and follows the core's changes from now on. */
  async start(): Promise<void> {
    const { core, logger } = this.options;
    this.following = [
      core.addSubscriptionValidator((_name, spec) => {
        const section = exportSection(spec);
        if (section) getConnector(section.connector).parseConfig(section.config);
      }),
      core.onSubscriptionChange(() => {
        this.sync().catch((e: unknown) => logger.error({ error: (e as Error).message }, 'starting or stopping an export failed'));
      }),
    ];
    await this.sync();
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

  private async syncNow(): Promise<void> {
    const { core, settings, logger } = this.options;
    const { backoff, ...runnerOptions } = this.options.runner ?? {};
    const budget = {
      messages: runnerOptions.maxOutstandingMessages ?? DEFAULT_BUDGET.messages,
      bytes: runnerOptions.maxOutstandingBytes ?? DEFAULT_BUDGET.bytes,
    };
    const exports = core.allSubscriptions().flatMap((sub) => {
      // A detached subscription receives nothing: its runner stops.
      const section = sub.detached ? undefined : exportSection(sub);
      return section ? [{ sub, section, text: JSON.stringify(section), identity: core.identity(sub.name) }] : [];
    });
    const current = (name: string) => this.runners.get(name);
    const fresh = exports
      .filter(({ sub, identity, text }) => current(sub.name)?.uid !== identity.uid || current(sub.name)?.section !== text)
      .map(({ sub, section, text, identity }) => {
        const factory = getConnector(section.connector);
        const config = factory.parseConfig(section.config);
        const start: { runner?: ExportRunner } = {};
        const context = {
          subscription: sub.name,
          identity,
          spec: sub,
          logger: logger.child({ subscription: sub.name }),
          settings,
          budget,
          notify: () => start.runner?.requestFlush(),
          topicSchema: () => core.topicSchema(sub.topic),
        };
        // The first connector is made now (a setting it refuses fails this sync); later ones replace a
        // connector that failed.
        let first: Connector | undefined = factory.create(config, context);
        const createConnector = () => {
          const connector = first ?? factory.create(config, context);
          first = undefined;
          return connector;
        };
        return { sub, identity, text, start, createConnector };
      });
    const wanted = new Map(exports.map(({ sub, identity, text }) => [sub.name, `${identity.uid} ${text}`]));
    for (const [name, { uid, section, runner }] of this.runners) {
      if (wanted.get(name) === `${uid} ${section}`) continue;
      await runner.stop();
      this.runners.delete(name);
    }
    for (const { sub, identity, text, start, createConnector } of fresh) {
      const runner = new ExportRunner({ core, subscription: sub.name, uid: identity.uid, createConnector, logger, ...runnerOptions, backoff: backoff?.() });
      start.runner = runner;
      this.runners.set(sub.name, { uid: identity.uid, section: text, runner });
      runner.start();
    }
  }

  runner(subscription: string): ExportRunner | undefined {
    return this.runners.get(this.options.core.subscriptionName(subscription))?.runner;
  }

  /** Stops every runner: in-flight writes finish, buffered data is finalized and acked. */
  async stop(): Promise<void> {
    for (const unfollow of this.following) unfollow();
    this.following = [];
    await this.syncing;
    await Promise.all([...this.runners.values()].map(({ runner }) => runner.stop()));
    this.runners.clear();
  }
}
