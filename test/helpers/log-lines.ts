import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino, { type Logger } from 'pino';
import { Backoff } from '../../src/connector/backoff.js';
import { ExportManager, type ExportManagerOptions } from '../../src/connector/export-manager.js';
import { PubSubCore } from '../../src/core/pubsub-core.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { tempDir } from './temp-dir.js';

/** One line of a captured log: the fields a test reads. */
export interface LogLine {
  level: number;
  msg: string;
  subscription?: string;
  state?: string;
  [field: string]: unknown;
}

/** A logger at info level whose lines are kept, parsed, in `lines` (what an operator reads in the job's log). */
export function capturedLogger(): { logger: Logger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const logged = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(JSON.parse(chunk.toString()) as LogLine);
      done();
    },
  });
  return { logger: pino({ level: 'info' }, logged), lines };
}

export interface LoggedExports {
  core: PubSubCore;
  exports: ExportManager;
  /** The export manager's log so far. */
  lines: LogLine[];
  close(): Promise<void>;
}

/**
 * A core (project `p`, topic `events`) and a started export manager whose log is captured, in a temp
 * directory; quick retries (backoff 20-200 ms) and `runner` on top.
 */
export async function openLoggedExports(runner: ExportManagerOptions['runner'] = {}): Promise<LoggedExports> {
  const dir = tempDir();
  const core = await PubSubCore.open({
    store: SqliteStore.open(join(dir.path, 'store'), { durability: 'process' }),
    projectId: 'p',
    tickMs: 20,
  });
  const { logger, lines } = capturedLogger();
  const exports = new ExportManager({
    core,
    settings: { dataDir: dir.path },
    logger,
    runner: { backoff: () => new Backoff(20, 200), ...runner },
  });
  await exports.start();
  await core.createTopic('events');
  return {
    core,
    exports,
    lines,
    close: async () => {
      await exports.stop();
      await core.close();
      dir.remove();
    },
  };
}
