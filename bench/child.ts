import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';

/**
 * A bench module run in a fresh Node process (same TypeScript loader as this one, via execArgv), talking
 * over IPC: so what it measures about itself — peak RSS, event-loop delay — belongs to its task alone.
 */
export class BenchChild<Out> {
  private readonly inbox: Out[] = [];
  private readonly waiters: ((m: Out) => void)[] = [];
  readonly exited: Promise<number>;

  private constructor(readonly process: ChildProcess) {
    process.on('message', (m: Out) => {
      const waiter = this.waiters.shift();
      if (waiter) waiter(m);
      else this.inbox.push(m);
    });
    this.exited = once(process, 'exit').then(([code, signal]) => (code ?? (signal ? 128 : 1)) as number);
  }

  static start<Out>(module: URL, args: string[], extraExecArgv: string[] = [], env: NodeJS.ProcessEnv = process.env): BenchChild<Out> {
    const child = fork(fileURLToPath(module), args, {
      execArgv: [...process.execArgv, ...extraExecArgv],
      env,
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    return new BenchChild<Out>(child);
  }

  /** The child's next message; rejects if it exits first. */
  next(): Promise<Out> {
    const queued = this.inbox.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    return Promise.race([
      new Promise<Out>((resolve) => this.waiters.push(resolve)),
      this.exited.then((code) =>
        Promise.reject(new Error(`${this.process.spawnargs.slice(-2).join(' ')}: exited (code ${code}) before replying`)),
      ),
    ]);
  }

  send(message: unknown): void {
    this.process.send(message as object);
  }

  async stop(): Promise<void> {
    if (this.process.exitCode === null && this.process.signalCode === null) this.process.kill('SIGTERM');
    await this.exited;
  }
}

/** A step that takes longer than this has hung (a full-scale memory step takes minutes, not an hour). */
const CHILD_TIMEOUT_MS = Number(process.env.BENCH_CHILD_TIMEOUT ?? 3600) * 1000;

/** Runs `module` in a fresh process and resolves with the one message it replies with. */
export async function runChild<Out>(
  module: URL,
  args: string[],
  extraExecArgv: string[] = [],
  env: NodeJS.ProcessEnv = process.env,
): Promise<Out> {
  const child = BenchChild.start<Out>(module, args, extraExecArgv, env);
  const what = `${fileURLToPath(module)} ${args[0] ?? ''}`;
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    child.process.kill('SIGKILL');
  }, CHILD_TIMEOUT_MS);
  try {
    const result = await child.next();
    const code = await child.exited;
    if (code !== 0) throw new Error(`${what} exited with code ${code}`);
    return result;
  } catch (e) {
    throw timedOut ? new Error(`${what} did not finish within BENCH_CHILD_TIMEOUT (${CHILD_TIMEOUT_MS / 1000} s)`) : e;
  } finally {
    clearTimeout(timer);
    await child.stop();
  }
}

/** In the child: sends `value` to the parent and waits until it is on its way. */
export function reply(value: unknown): Promise<void> {
  return new Promise((resolve, reject) => {
    if (!process.send) throw new Error('not started through BenchChild (no IPC channel)');
    process.send(value, (e: Error | null) => (e ? reject(e) : resolve()));
  });
}

/**
 * In the child: exits when the parent goes away (its IPC channel closes), so no step outlives its benchmark.
 * The listener keeps the channel, and so the process, alive: a child that calls this ends with process.exit.
 */
export function exitWithParent(): void {
  process.once('disconnect', () => process.exit(1));
}
