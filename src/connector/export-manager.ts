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
 * the core: `sync()` starts runners for new ones and stops those whose subscription went away.
 */
export class ExportManager {
  private readonly runners = new Map<string, ExportRunner>();

  constructor(private readonly options: ExportManagerOptions) {}

  /** Validates every new export subscription's config first, so a bad one starts nothing. */
  async sync(): Promise<void> {
    const { core, settings, logger } = this.options;
    const exports = core.listSubscriptions().flatMap((sub) => {
      const section = exportSection(sub);
      return section ? [{ sub, section }] : [];
    });
    const fresh = exports
      .filter(({ sub }) => !this.runners.has(sub.name))
      .map(({ sub, section }) => {
        const factory = getConnector(section.connector);
        return { sub, factory, config: factory.parseConfig(section.config) };
      });
    const names = new Set(exports.map(({ sub }) => sub.name));
    for (const [name, runner] of this.runners) {
      if (names.has(name)) continue;
      await runner.stop();
      this.runners.delete(name);
    }
    for (const { sub, factory, config } of fresh) {
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
      runner.start();
    }
  }

  runner(subscription: string): ExportRunner | undefined {
    return this.runners.get(this.options.core.subscriptionName(subscription));
  }

  /** Stops every runner: in-flight writes finish, buffered data is finalized and acked. */
  async stop(): Promise<void> {
    await Promise.all([...this.runners.values()].map((r) => r.stop()));
    this.runners.clear();
  }
}
