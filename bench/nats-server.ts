import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { tempDir } from '../test/helpers/core.js';

export interface NatsServer {
  /** nats://host:port */
  url: string;
  version: string;
  stop(): Promise<void>;
}

function installedVersion(): string | undefined {
  const probe = spawnSync('nats-server', ['--version'], { encoding: 'utf8' });
  return probe.status === 0 ? probe.stdout.trim() : undefined;
}

/** apt-get as root, or through password-less sudo; false when neither is possible. */
function aptGet(args: string[]): boolean {
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const asRoot = process.getuid?.() === 0;
  const command = asRoot ? ['apt-get', ...args] : ['sudo', '-n', 'apt-get', ...args];
  const run = spawnSync(command[0]!, command.slice(1), { env, stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8' });
  return run.status === 0;
}

/**
 * Debian's `nats-server` on PATH, installed with apt-get if missing (the package lists are refreshed once
 * if the first try fails). Returns the reason when it cannot be had, for the benchmark to print.
 */
export function ensureNatsServer(): { version: string } | { unavailable: string } {
  let version = installedVersion();
  if (version) return { version };
  console.error('endpoint: nats-server is not on PATH; installing the Debian package (apt-get install -y nats-server)...');
  if (!aptGet(['install', '-y', 'nats-server']) && aptGet(['update'])) aptGet(['install', '-y', 'nats-server']);
  version = installedVersion();
  if (version) return { version };
  return {
    unavailable:
      'nats-server is not installed and `apt-get install -y nats-server` failed (needs root or password-less sudo, and the Debian ' +
      'package lists); install it by hand (Debian/Ubuntu: apt-get install nats-server) to get the JetStream comparison',
  };
}

/** A JetStream-enabled nats-server on 127.0.0.1, a free port, file storage in a temp dir (removed on stop). */
export async function startNatsServer(version: string): Promise<NatsServer> {
  const dir = tempDir('orderly-bench-nats-');
  // -p -1: any free port; the server logs the one it took.
  const child = spawn('nats-server', ['-js', '-sd', dir.path, '-a', '127.0.0.1', '-p', '-1'], { stdio: ['ignore', 'ignore', 'pipe'] });
  const exited = once(child, 'exit');
  const stop = async () => {
    if (child.exitCode === null) child.kill('SIGTERM');
    await exited;
    dir.remove();
  };
  try {
    const url = await new Promise<string>((resolve, reject) => {
      let log = '';
      let listening = false;
      child.stderr!.on('data', (chunk: Buffer) => {
        if (listening) return;
        log += chunk.toString();
        const m = /Listening for client connections on (\S+:\d+)/.exec(log);
        if (m) {
          listening = true;
          resolve(`nats://${m[1]}`);
        }
      });
      void exited.then(() => reject(new Error(`nats-server exited before listening: ${log}`)));
    });
    return { url, version, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}
