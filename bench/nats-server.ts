import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { tempDir } from '../test/helpers/temp-dir.js';

export interface NatsServer {
  /** nats://host:port */
  url: string;
  version: string;
  stop(): Promise<void>;
}

export interface NatsBinary {
  path: string;
  version: string;
}

/** On PATH, or where Debian puts it (/usr/sbin, which a non-root PATH often lacks). */
function installed(): NatsBinary | undefined {
  for (const path of ['nats-server', '/usr/sbin/nats-server']) {
    const probe = spawnSync(path, ['--version'], { encoding: 'utf8' });
    if (probe.status === 0) return { path, version: probe.stdout.trim() };
  }
  return undefined;
}

/** apt-get as root, or through password-less sudo; the failure's last words, or undefined on success. */
function aptGet(args: string[]): string | undefined {
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const asRoot = process.getuid?.() === 0;
  const command = asRoot ? ['apt-get', ...args] : ['sudo', '-n', 'apt-get', ...args];
  const run = spawnSync(command[0]!, command.slice(1), { env, stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8' });
  if (run.status === 0) return undefined;
  return run.error ? `${command[0]}: ${run.error.message}` : run.stderr.trim().split('\n').slice(-1)[0] || `exit code ${run.status}`;
}

/**
 * Debian's `nats-server`, installed with apt-get if missing (the package lists are refreshed once if the
 * first try fails). Returns the reason when it cannot be had, for the benchmark to print.
 */
export function ensureNatsServer(): NatsBinary | { unavailable: string } {
  const found = installed();
  if (found) return found;
  console.error('endpoint: nats-server is not installed; installing the Debian package (apt-get install -y nats-server)...');
  let failure = aptGet(['install', '-y', 'nats-server']);
  if (failure !== undefined && aptGet(['update']) === undefined) failure = aptGet(['install', '-y', 'nats-server']);
  const now = installed();
  if (now) return now;
  return {
    unavailable:
      failure === undefined
        ? 'apt-get installed nats-server, but it is neither on PATH nor in /usr/sbin'
        : `\`apt-get install -y nats-server\` failed (${failure}); it needs root or password-less sudo and Debian's package lists. ` +
          'Install it by hand (apt-get install nats-server) to get the JetStream comparison',
  };
}

/** A JetStream-enabled nats-server on 127.0.0.1, a free port, file storage in a temp dir (removed on stop). */
export async function startNatsServer(binary: NatsBinary): Promise<NatsServer> {
  const dir = tempDir('orderly-bench-nats-');
  // -p -1: any free port; the server logs the one it took.
  const child = spawn(binary.path, ['-js', '-sd', dir.path, '-a', '127.0.0.1', '-p', '-1'], { stdio: ['ignore', 'ignore', 'pipe'] });
  const exited = once(child, 'exit');
  // Should the benchmark die without stopping it, the server must not outlive it.
  const reap = () => child.kill('SIGKILL');
  process.once('exit', reap);
  const stop = async () => {
    if (child.exitCode === null) child.kill('SIGTERM');
    await exited;
    process.off('exit', reap);
    dir.remove();
  };
  try {
    const url = await new Promise<string>((resolve, reject) => {
      let log = '';
      let listening = false;
      child.stderr.on('data', (chunk: Buffer) => {
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
    return { url, version: binary.version, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}
