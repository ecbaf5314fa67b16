import { emptyResult, type Connector, type ConnectorCounters, type ExportMessage, type WriteResult } from './connector.js';

/**
 * A connector that loads its implementation when it is opened, so the module that registers a factory
 * stays light: `orderly validate` and `orderly --help` load every registered connector's factory, and a
 * writer's own dependencies (a database driver, a cloud SDK) cost start-up time there.
 *
 *   create: (config, context) => lazyConnector(async () => new (await import('./writer.js')).Writer(config, context))
 *
 * A failed load is a failed `open()`: the runner retries it with backoff.
 */
export function lazyConnector(load: () => Promise<Connector>): Connector {
  return new LazyConnector(load);
}

class LazyConnector implements Connector {
  private inner?: Connector;

  constructor(private readonly load: () => Promise<Connector>) {}

  get counters(): ConnectorCounters | undefined {
    return this.inner?.counters;
  }

  async open(): Promise<void> {
    this.inner ??= await this.load();
    await this.inner.open();
  }

  write(batch: ExportMessage[]): Promise<WriteResult> {
    return this.loaded().write(batch);
  }

  /** Before a successful open nothing was written, so nothing is buffered. */
  async flush(mode: 'due' | 'all'): Promise<WriteResult> {
    return this.inner ? this.inner.flush(mode) : emptyResult();
  }

  async close(): Promise<void> {
    await this.inner?.close();
  }

  busy(): { name: string; since: number } | undefined {
    return this.inner?.busy?.();
  }

  private loaded(): Connector {
    if (!this.inner) throw new Error('the connector was used before open() succeeded');
    return this.inner;
  }
}
