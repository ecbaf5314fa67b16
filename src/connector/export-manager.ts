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
 * the core, in every project: `sync()` starts runners for new ones and stops those whose subscription
 * went away — or was created again under the same name (another uid: a new runner and new sink state).
 */
export class ExportManager {
  private readonly runners = new Map<string, { uid: string; runner: ExportRunner }>();
  /** Syncs run one after another: two at once could both start a runner for the same subscription. */
  private syncing: Promise<void> = Promise.resolve();

  constructor(private readonly options: ExportManagerOptions) {}

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
      const section = exportSection(sub);
      return section ? [{ sub, section, identity: core.identity(sub.name) }] : [];
    });
    const fresh = exports
      .filter(({ sub, identity }) => this.runners.get(sub.name)?.uid !== identity.uid)
      .map(({ sub, section, identity }) => {
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
        };
        // The first connector is made now (a setting it refuses fails this sync); later ones replace a
        // connector that failed.
        let first: Connector | undefined = factory.create(config, context);
        const createConnector = () => {
          const connector = first ?? factory.create(config, context);
          first = undefined;
          return connector;
        };
        return { sub, identity, start, createConnector };
      });
    const wanted = new Map(exports.map(({ sub, identity }) => [sub.name, identity.uid]));
    for (const [name, { uid, runner }] of this.runners) {
      if (wanted.get(name) === uid) continue;
      await runner.stop();
      this.runners.delete(name);
    }
    for (const { sub, identity, start, createConnector } of fresh) {
      const runner = new ExportRunner({ core, subscription: sub.name, uid: identity.uid, createConnector, logger, ...runnerOptions, backoff: backoff?.() });
      start.runner = runner;
      this.runners.set(sub.name, { uid: identity.uid, runner });
      runner.start();
    }
  }

  runner(subscription: string): ExportRunner | undefined {
    return this.runners.get(this.options.core.subscriptionName(subscription))?.runner;
  }

  /** Stops every runner: in-flight writes finish, buffered data is finalized and acked. */
  async stop(): Promise<void> {
    await this.syncing;
    await Promise.all([...this.runners.values()].map(({ runner }) => runner.stop()));
    this.runners.clear();
  }
}
