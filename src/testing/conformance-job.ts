import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import { Backoff } from '../connector/backoff.js';
import { loadJobWithPlugins } from '../job/job-config.js';
import { resolvePlugin } from '../job/plugins.js';
import { JobRuntime } from '../job/job-runtime.js';
import { createLogger } from '../log.js';
import type { ConformanceOptions, SinkUnderTest } from './conformance-options.js';
import type { PublishedMessage } from './sink-check.js';

export const TOPIC = 'conformance-events';
export const SUBSCRIPTION = 'conformance-export';

/**
 * Runners that make every path happen with a few hundred messages: small batches, a small budget (so a
 * buffering connector is asked to `flush('all')` while the export runs) and short backoffs.
 */
const RUNNER = { maxBatchMessages: 50, maxOutstandingMessages: 100, flushIntervalMs: 100, backoff: () => new Backoff(20, 200) };

/** One case's job: a job file in its own temporary folder, exporting one ordered subscription through the connector under test. */
export class ConformanceJob {
  readonly file: string;

  private constructor(
    readonly sink: SinkUnderTest,
    private readonly options: ConformanceOptions,
  ) {
    this.file = join(sink.dir, 'job.json');
  }

  /** `connector` overrides the name in exportConfig (the redelivery case's wrapper). */
  static create(options: ConformanceOptions, name: string, connector = options.connector): ConformanceJob {
    const dir = mkdtempSync(join(options.tempDir ?? tmpdir(), `orderly-conformance-${name}-`));
    const job = new ConformanceJob({ dir }, options);
    const plugin =
      options.plugin &&
      (options.plugin.startsWith('.') || isAbsolute(options.plugin) ? resolve(options.plugin) : packageInCwd(options.plugin));
    const document = {
      projectId: 'orderly-conformance',
      dataDir: './data',
      // A crash here is a killed process, which 'process' durability survives.
      durability: 'process',
      plugins: plugin ? [plugin] : [],
      ...options.settings?.(job.sink),
      metrics: { port: 0 },
      topics: [{ name: TOPIC }],
      subscriptions: [
        {
          name: SUBSCRIPTION,
          topic: TOPIC,
          enableMessageOrdering: true,
          ackDeadlineSeconds: 30,
          exportConfig: { ...options.config(job.sink), connector },
        },
      ],
    };
    writeFileSync(job.file, JSON.stringify(document, null, 2));
    return job;
  }

  /** The job's data directory (absolute), which connectors get as `settings.dataDir`. */
  get dataDir(): string {
    return join(this.sink.dir, 'data');
  }

  get skipsDuplicates(): boolean {
    return this.options.skipsDuplicates;
  }

  /** The job in this process: exports started unless `withExports` is false. */
  async start(withExports = true): Promise<JobRuntime> {
    const logger = createLogger({ level: process.env.ORDERLY_LOG_LEVEL ?? 'silent' });
    return JobRuntime.start(await loadJobWithPlugins(this.file), logger, { mode: withExports ? 'run' : 'inspect', exportRunner: RUNNER });
  }

  /** Publishes the case's messages: `messages` over `keys` ordering keys, every tenth without a key. */
  async publish(runtime: JobRuntime): Promise<PublishedMessage[]> {
    const { messages = 300, keys = 10 } = this.options;
    const inputs = Array.from({ length: messages }, (_, i) => {
      const key = i % 10 === 9 ? '' : `key-${i % keys}`;
      return { data: JSON.stringify({ key, index: i }), orderingKey: key || undefined };
    });
    const published: PublishedMessage[] = [];
    for (let i = 0; i < inputs.length; i += 100) {
      const batch = inputs.slice(i, i + 100);
      const ids = await runtime.core.publish(TOPIC, batch);
      ids.forEach((id, j) => published.push({ id, key: batch[j]!.orderingKey ?? '' }));
    }
    return published;
  }

  /** What the sink holds, as the connector's author reads it back. */
  readBack(): Promise<string[]> {
    return this.options.readBack(this.sink);
  }

  remove(): void {
    rmSync(this.sink.dir, { recursive: true, force: true });
  }
}

/**
 * A package name as the current folder sees it (its node_modules, or the package itself): the job file is
 * in a temporary folder, from which the connector's own package (or one installed beside the tests) is not
 * found. As given if not found there (then the job looks from Orderly's folder).
 */
function packageInCwd(spec: string): string {
  try {
    return resolvePlugin(spec, process.cwd());
  } catch {
    return spec;
  }
}

/** Polls `check` until it is true; fails naming `what` after `timeoutMs`. */
export async function waitFor(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
