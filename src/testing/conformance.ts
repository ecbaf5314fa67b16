import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Connector, ConnectorContext, ExportMessage, WriteResult } from '../connector/connector.js';
import { getConnector, registerConnector, registeredConnectors, type ConnectorFactory } from '../connector/registry.js';
import type { JobRuntime } from '../job/job-runtime.js';
import { packageFile } from '../package-file.js';
import { STORE_FILE } from '../store/sqlite-store.js';
import { ConformanceJob, SUBSCRIPTION, waitFor } from './conformance-job.js';
import type { ConformanceCase, ConformanceOptions } from './conformance-options.js';
import { sinkProblems, type PublishedMessage } from './sink-check.js';

/** A connector broke the contract: the message says what the sink holds that it should not (or lacks). */
export class ConformanceError extends Error {
  /** @param caseName the case (`<connector>: <case>`); @param problems what is wrong with the sink, one line each */
  constructor(
    readonly caseName: string,
    readonly problems: string[],
  ) {
    super(`${caseName}: ${problems.join('; ')}`);
    this.name = 'ConformanceError';
  }
}

/**
 * The cases every export connector should pass, each on a real job (a store, an export runner and the
 * connector, in a temporary folder), checking what the connector's `readBack` finds in the sink:
 * - **ordering**: every message exported, each ordering key in publish order;
 * - **redelivery**: the sink fails right after writing (the runner reopens a new connector and hands it
 *   what was not acked yet, some of it already written): nothing lost, keys in order, no duplicates if
 *   the connector skips them;
 * - **crash and restart**: `orderly run` is killed (SIGKILL) while it exports, then the job runs again;
 * - **buffered flush**: with a small runner budget (the runner calls `flush('all')` when it holds that much)
 *   every message is acked only once it is in the sink (read back each time the connector reports
 *   deliveries written), and all of them get there without a shutdown;
 * - **a new store**: the job runs, its store is deleted (the next starts anew: a new subscription uid, and
 *   message ids and sequences from the start again), and it runs again on the same sink: the second
 *   run's messages are written too. A connector that keys what it remembers by the subscription's name
 *   takes them for the first run's, acks them and writes them nowhere.
 */
export function conformanceCases(options: ConformanceOptions): ConformanceCase[] {
  const cases: [string, (job: ConformanceJob) => Promise<string[]>][] = [
    ['ordering', ordering],
    ['redelivery', redelivery],
    ['crash and restart', crashAndRestart],
    ['buffered flush', bufferedFlush],
    ['a new store', newStore],
  ];
  return cases.map(([name, run]) => ({
    name: `${options.connector}: ${name}`,
    async run() {
      const job = ConformanceJob.create(
        options,
        name.replaceAll(' ', '-'),
        name === 'redelivery'
          ? faultyConnector(options.connector)
          : name === 'buffered flush'
            ? checkedConnector(options)
            : options.connector,
      );
      try {
        const problems = await run(job);
        if (problems.length) throw new ConformanceError(`${options.connector}: ${name}`, problems);
      } finally {
        job.remove();
      }
    },
  }));
}

/** Publishes, waits until everything is acked, stops (finalizing what is buffered), and checks the sink. */
async function ordering(job: ConformanceJob): Promise<string[]> {
  return sinkProblems(await exportOnce(job), await job.readBack(), job.skipsDuplicates);
}

/** Runs the job: publishes, waits until everything is acked, and stops (finalizing what is buffered). */
async function exportOnce(job: ConformanceJob): Promise<PublishedMessage[]> {
  const runtime = await job.start();
  try {
    const published = await job.publish(runtime);
    await drained(runtime);
    return published;
  } finally {
    await runtime.stop();
  }
}

/** Two runs on one sink with the store deleted between them: each run's messages are in the sink. */
async function newStore(job: ConformanceJob): Promise<string[]> {
  const first = await exportOnce(job);
  for (const file of readdirSync(job.dataDir)) if (file.startsWith(STORE_FILE)) rmSync(join(job.dataDir, file));
  const second = await exportOnce(job);
  // The new store numbers its messages afresh, so the second run's ids may be the first run's again.
  const held = new Map<string, number>();
  for (const id of await job.readBack()) held.set(id, (held.get(id) ?? 0) + 1);
  const wanted = new Map<string, number>();
  for (const { id } of [...first, ...second]) wanted.set(id, (wanted.get(id) ?? 0) + 1);
  const short = [...wanted].filter(([id, n]) => (held.get(id) ?? 0) < n).map(([id]) => id);
  return short.length
    ? [
        `${short.length} messages of the run on a new store are not in the sink, e.g. ${short.slice(0, 3).join(', ')} ` +
          '(is what the connector remembers keyed by the subscription name rather than context.identity.uid?)',
      ]
    : [];
}

/** The same, through a wrapper whose connectors fail right after the real one wrote (three times). */
async function redelivery(job: ConformanceJob): Promise<string[]> {
  const problems = await ordering(job);
  const injected = faults.get(job.dataDir) ?? 0;
  if (injected < FAULTS)
    problems.push(
      `the sink failed only ${injected} of ${FAULTS} times: the case needs the connector to report writes while the export runs`,
    );
  return problems;
}

/** Publishes a backlog, has `orderly run` export it until it is killed mid-way, then runs the job again in this process. */
async function crashAndRestart(job: ConformanceJob): Promise<string[]> {
  let runtime = await job.start(false);
  let published: PublishedMessage[];
  try {
    published = await job.publish(runtime);
  } finally {
    await runtime.stop();
  }
  const child = spawn(process.execPath, [packageFile('bin/orderly.js'), 'run', job.file], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, ORDERLY_LOG_LEVEL: 'warn' },
  });
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = once(child, 'exit');
  try {
    const lock = join(job.sink.dir, 'data', 'orderly.lock');
    const delivered = async () => {
      if (child.exitCode !== null) throw new Error(`orderly run exited (${child.exitCode}) before the crash: ${stderr}`);
      const metrics = existsSync(lock) ? (JSON.parse(readFileSync(lock, 'utf8') || '{}') as { metrics?: string }).metrics : undefined;
      if (!metrics) return false;
      // Bounded: a /status that never answers must end in waitFor's timeout (and the kill below), not hang
      // the case until the test runner gives up on it with the child still running.
      const answer = await fetch(`${metrics}/status`, { signal: AbortSignal.timeout(5_000) }).catch(() => undefined);
      if (!answer?.ok) return false;
      const status = (await answer.json()) as { delivered: number }[];
      return (status[0]?.delivered ?? 0) > 0;
    };
    // Killed once the connector has been handed messages: some written, some buffered or in flight.
    await waitFor('orderly run to start exporting', delivered);
  } finally {
    child.kill('SIGKILL');
    await exited;
  }
  runtime = await job.start();
  try {
    await drained(runtime);
  } finally {
    await runtime.stop();
  }
  return sinkProblems(published, await job.readBack(), job.skipsDuplicates);
}

/**
 * Publishes more than the runner's budget and waits for every ack without a shutdown: a buffering
 * connector must finalize when asked (`flush('all')`). Meanwhile no message may be acked before the
 * sink holds it.
 */
async function bufferedFlush(job: ConformanceJob): Promise<string[]> {
  const runtime = await job.start();
  const problems: string[] = [];
  early.set(job.dataDir, problems);
  let published: PublishedMessage[];
  try {
    published = await job.publish(runtime);
    await waitFor('every message acked without a shutdown (does the connector finalize on flush("all")?)', async () => {
      // Read the acks first: whatever was acked by then must be in the sink when it is read after.
      const acked = runtime.core.metrics(SUBSCRIPTION).counters.acked;
      const held = new Set(await job.readBack()).size;
      if (held < acked && !problems.length)
        problems.push(`${acked} messages were acked while the sink held ${held}: an ack came before the write was durable`);
      return acked >= published.length;
    });
  } finally {
    await runtime.stop();
    early.delete(job.dataDir);
  }
  return [...problems, ...sinkProblems(published, await job.readBack(), job.skipsDuplicates)];
}

async function drained(runtime: JobRuntime): Promise<void> {
  await waitFor('the export to ack every message', () => runtime.core.metrics(SUBSCRIPTION).backlogMessages === 0);
}

/** The buffered flush case's problems, per job data directory, which its checked connectors add to. */
const early = new Map<string, string[]>();

/**
 * What a wrapped connector does around the one under test, per connector made: sees each batch handed
 * over (`handed`), and each result before the runner does (`result`: may record, throw, or pass it on).
 */
interface Interceptor {
  handed?: (batch: ExportMessage[]) => void;
  result: (result: WriteResult) => Promise<WriteResult>;
}

/**
 * Registers (once) `<name>.<suffix>`: the connector under test, with `intercept`'s calls around its
 * writes and flushes (made per connector from its context); open, close and busy pass through.
 */
function wrappedConnector(name: string, suffix: string, intercept: (context: ConnectorContext) => Interceptor): string {
  const wrapped = `${name}.${suffix}`;
  const inner = getConnector(name);
  const factory: ConnectorFactory = {
    ...inner,
    name: wrapped,
    counters: undefined,
    create(config, context) {
      const connector = inner.create(config, context);
      const { handed, result } = intercept(context);
      const wrapper: Connector = {
        open: () => connector.open(),
        write: async (batch) => {
          handed?.(batch);
          return result(await connector.write(batch));
        },
        flush: async (mode) => result(await connector.flush(mode)),
        close: () => connector.close(),
        busy: () => connector.busy?.(),
      };
      return wrapper;
    },
  };
  if (!registeredConnectors().includes(wrapped)) registerConnector(factory);
  return wrapped;
}

/**
 * Registers (once) `<name>.conformance-checked`: the connector under test, except that each time a call
 * reports deliveries written, the sink is read back at once and must hold every one of them (an ack is
 * safe only then). Comparing the ack counter with the sink now and then missed a connector that reports
 * a batch written and makes it durable a moment later.
 */
function checkedConnector(options: ConformanceOptions): string {
  return wrappedConnector(options.connector, 'conformance-checked', (context) => {
    const { dataDir } = context.settings;
    const sink = { dir: dirname(dataDir) };
    /** The message id of each delivery handed over and not yet reported. */
    const handed = new Map<string, string>();
    return {
      handed: (batch) => {
        for (const d of batch) handed.set(d.id, d.message.messageId);
      },
      result: async (result) => {
        const problems = early.get(dataDir);
        if (result.written.length && problems && !problems.length) {
          const held = new Set(await options.readBack(sink));
          const missing = result.written.map((id) => handed.get(id)).filter((id) => id !== undefined && !held.has(id));
          if (missing.length)
            problems.push(
              `${missing.length} messages were reported written while the sink did not hold them, e.g. ${missing.slice(0, 3).join(', ')}: ` +
                'an ack came before the write was durable',
            );
        }
        for (const id of [...result.written, ...result.failed.map((f) => f.id), ...result.deferred]) handed.delete(id);
        return result;
      },
    };
  });
}

/** Faults the redelivery case's connectors injected, per job data directory. */
const faults = new Map<string, number>();
const FAULTS = 3;

/**
 * Registers (once) `<name>.conformance-faults`: the connector under test, except that three times a call
 * that reported writes throws afterwards instead of returning. The runner takes that for a failed sink:
 * it opens a new connector and hands it everything not acked, including what the old one had written.
 */
function faultyConnector(name: string): string {
  return wrappedConnector(name, 'conformance-faults', (context) => {
    const { dataDir } = context.settings;
    let calls = 0;
    return {
      result: async (result) => {
        const n = faults.get(dataDir) ?? 0;
        if (result.written.length && n < FAULTS && calls++ % 2 === 0) {
          faults.set(dataDir, n + 1);
          throw new Error('conformance: the sink failed after writing');
        }
        return result;
      },
    };
  });
}
