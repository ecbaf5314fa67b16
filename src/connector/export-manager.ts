import type { PubSubCore } from '../core/pubsub-core.js';
import type { Logger } from '../log.js';
import { Backoff } from './backoff.js';
import type { ConnectorSettings } from './connector.js';
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
 * the core. After `start()` it follows the core: an export section is validated by its connector when a
 * subscription is created or updated (a bad one is refused there), and a created, changed or deleted
 * export subscription starts, restarts or stops its runner — whichever API made the change.
 */
export class ExportManager {
  private readonly runners = new Map<string, ExportRunner>();
  /** Each runner's export section as it was started, to see when an update changed it. */
  private readonly sections = new Map<string, string>();
  private following: (() => void)[] = [];
  private syncing: Promise<void> = Promise.resolve();

  constructor(private readonly options: ExportManagerOptions) {}

  /** Starts the runners of the current export subscriptions and follows the core's changes from now on. */
  async start(): Promise<void> {
    const { core } = this.options;
    this.following = [
      core.addSubscriptionValidator((_name, spec) => {
        const section = exportSection(spec);
        if (section) getConnector(section.connector).parseConfig(section.config);
      }),
      core.onSubscriptionChange(() => {
        this.syncing = this.syncing.then(
          () => this.sync(),
          () => this.sync(),
        );
        this.syncing.catch((e: unknown) => this.options.logger.error({ error: (e as Error).message }, 'starting or stopping an export failed'));
      }),
    ];
    await this.sync();
  }

  /**
   * Brings the runners in line with the core's export subscriptions. Validates every new export
   * subscription's config first, so a bad one starts nothing.
   */
  async sync(): Promise<void> {
    const { core, settings, logger } = this.options;
    const exports = core.listSubscriptions().flatMap((sub) => {
      const section = exportSection(sub);
      return section ? [{ sub, section, text: JSON.stringify(section) }] : [];
    });
    const current = new Map(exports.map((e) => [e.sub.name, e.text]));
    for (const [name, runner] of this.runners) {
      if (current.get(name) === this.sections.get(name)) continue; // unchanged
      await runner.stop();
      this.runners.delete(name);
      this.sections.delete(name);
    }
    const fresh = exports
      .filter(({ sub }) => !this.runners.has(sub.name))
      .map(({ sub, section, text }) => {
        const factory = getConnector(section.connector);
        return { sub, factory, text, config: factory.parseConfig(section.config) };
      });
    for (const { sub, factory, config, text } of fresh) {
      const { backoff, ...runnerOptions } = this.options.runner ?? {};
      const budget = {
        messages: runnerOptions.maxOutstandingMessages ?? DEFAULT_BUDGET.messages,
        bytes: runnerOptions.maxOutstandingBytes ?? DEFAULT_BUDGET.bytes,
      };
      let runner: ExportRunner | undefined;
      const connector = factory.create(config, {
        subscription: sub.name,
        spec: sub,
        logger: logger.child({ subscription: sub.name }),
        settings,
        budget,
        notify: () => runner?.requestFlush(),
      });
      runner = new ExportRunner({ core, subscription: sub.name, connector, logger, ...runnerOptions, backoff: backoff?.() });
      this.runners.set(sub.name, runner);
      this.sections.set(sub.name, text);
      runner.start();
    }
  }

  runner(subscription: string): ExportRunner | undefined {
    return this.runners.get(this.options.core.subscriptionName(subscription));
  }

  /** Stops every runner: in-flight writes finish, buffered data is finalized and acked. */
  async stop(): Promise<void> {
    for (const unfollow of this.following) unfollow();
    this.following = [];
    await this.syncing.catch(() => undefined);
    await Promise.all([...this.runners.values()].map((r) => r.stop()));
    this.runners.clear();
  }
}
