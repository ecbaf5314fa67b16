import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { DeliveryCounters } from '../src/core/subscription-metrics.js';
import { readLock } from '../src/job/job-lock.js';
import { tempDir } from '../test/helpers/temp-dir.js';
import { orderlyBin, orderlyNode } from './paths.js';

export interface ServeProcess {
  /** host:port, as PUBSUB_EMULATOR_HOST takes it. */
  host: string;
  projectId: string;
  process: ChildProcess;
  /** The subscription's delivery counters, read from the process's Prometheus /metrics. */
  counters(subscription: string): Promise<Pick<DeliveryCounters, 'acked' | 'nacked' | 'expired' | 'redelivered'>>;
  stop(): Promise<void>;
}

const COUNTERS = {
  acked: 'orderly_acked_total',
  nacked: 'orderly_nacked_total',
  expired: 'orderly_expired_total',
  redelivered: 'orderly_redelivered_total',
};

/**
 * A real `orderly serve` child process (whatever bin/orderly.js runs) on a fresh data directory, with its
 * metrics endpoint on a free port, so the server's own counters can be read from outside.
 */
export async function startOrderlyServe(): Promise<ServeProcess> {
  const dir = tempDir('orderly-bench-serve-');
  const projectId = 'orderly-bench';
  const job = join(dir.path, 'job.json');
  writeFileSync(job, JSON.stringify({ projectId, dataDir: join(dir.path, 'data'), metrics: { port: 0 } }));
  const child = spawn(process.execPath, [...orderlyNode.flags, orderlyBin, 'serve', '--config', job, '--port', '0'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = once(child, 'exit');
  // Should the benchmark die without stopping it, the server must not outlive it.
  const reap = () => child.kill('SIGKILL');
  process.once('exit', reap);
  try {
    const host = await new Promise<string>((resolve, reject) => {
      let seen = '';
      let listening = false;
      // Read for the child's whole life (its log goes there too), so its stdout never fills up and blocks it.
      child.stdout.on('data', (chunk: Buffer) => {
        if (listening) return;
        seen += chunk.toString();
        const m = /PUBSUB_EMULATOR_HOST=(\S+)\)/.exec(seen);
        if (m) {
          listening = true;
          resolve(m[1]!);
        }
      });
      void exited.then(() => reject(new Error(`orderly serve exited before listening: ${seen}`)));
    });
    // The job writes its lock (with the metrics address) before it prints the endpoint.
    const metrics = readLock(join(dir.path, 'data'))?.metrics;
    if (!metrics) throw new Error('orderly serve did not publish its metrics address in its lock file');
    return {
      host,
      projectId,
      process: child,
      async counters(subscription) {
        const text = await (await fetch(`${metrics}/metrics`)).text();
        const read = (metric: string) => {
          const line = text.split('\n').find((l) => l.startsWith(`${metric}{subscription="${subscription}"}`));
          return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
        };
        return {
          acked: read(COUNTERS.acked),
          nacked: read(COUNTERS.nacked),
          expired: read(COUNTERS.expired),
          redelivered: read(COUNTERS.redelivered),
        };
      },
      async stop() {
        if (child.exitCode === null) child.kill('SIGTERM');
        await exited;
        process.off('exit', reap);
        dir.remove();
      },
    };
  } catch (e) {
    child.kill('SIGKILL');
    await exited;
    process.off('exit', reap);
    dir.remove();
    throw e;
  }
}
