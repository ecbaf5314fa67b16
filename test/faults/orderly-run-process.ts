import { spawn, type ChildProcess } from 'node:child_process';
import { orderlyBin } from '../helpers/cli.js';

/**
 * `orderly run <job>` as a child process, the way a user runs it. `ready` resolves with the Pub/Sub
 * endpoint's port (if the job serves one), the metrics URL and the worker id once the job logs "job
 * running"; `exited` with how it ended.
 */
export class OrderlyRunProcess {
  readonly ready: Promise<{ port: number; metrics?: string; worker?: string }>;
  /** Resolves once it logs "job starting": its stop signals are handled from then on, the job not yet started. */
  readonly starting: Promise<void>;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** The last lines it printed (both streams), for a failure message. */
  private readonly tail: string[] = [];
  private readonly child: ChildProcess;

  /** How long a start may take on a loaded machine before it counts as hung. */
  static readonly START_TIMEOUT_MS = 90_000;

  constructor(job: string, args: string[] = [], env: NodeJS.ProcessEnv = {}) {
    this.child = spawn(process.execPath, [orderlyBin, 'run', job, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      // The test runner's environment silences logs; the port is read from the "job running" line.
      env: { ...process.env, ORDERLY_LOG_LEVEL: 'info', ...env },
    });
    this.exited = new Promise((resolve) => this.child.once('exit', (code, signal) => resolve({ code, signal })));
    let starting!: () => void;
    this.starting = new Promise((resolve) => (starting = resolve));
    this.ready = new Promise((resolve, reject) => {
      const hung = setTimeout(
        () => reject(new Error(`orderly run was not ready after ${OrderlyRunProcess.START_TIMEOUT_MS} ms\n${this.output()}`)),
        OrderlyRunProcess.START_TIMEOUT_MS,
      );
      let pending = '';
      this.child.stdout!.on('data', (chunk: Buffer) => {
        pending += chunk.toString();
        const lines = pending.split('\n');
        pending = lines.pop()!;
        for (const line of lines) {
          this.remember(line);
          if (/"msg":"job starting"/.test(line)) starting();
          if (!/"msg":"job running"/.test(line)) continue;
          clearTimeout(hung);
          resolve({
            port: Number(/"pubsubEndpoint":(\d+)/.exec(line)?.[1]),
            metrics: /"metrics":"([^"]+)"/.exec(line)?.[1],
            worker: /"worker":"([^"]+)"/.exec(line)?.[1],
          });
        }
      });
      this.child.stderr!.on('data', (chunk: Buffer) =>
        chunk
          .toString()
          .split('\n')
          .forEach((l) => this.remember(l)),
      );
      void this.exited.then(({ code, signal }) => {
        clearTimeout(hung);
        reject(new Error(`orderly run exited before it was ready (${code ?? signal})\n${this.output()}`));
      });
    });
    // Not every caller waits for `ready` (a kill during start-up); its rejection is then expected.
    this.ready.catch(() => undefined);
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** Does nothing once it exited (Node knows, so a reused pid is never signalled). */
  kill(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  output(): string {
    return this.tail.join('\n');
  }

  private remember(line: string): void {
    if (!line) return;
    this.tail.push(line.length > 500 ? `${line.slice(0, 500)}...` : line);
    if (this.tail.length > 40) this.tail.shift();
  }
}
