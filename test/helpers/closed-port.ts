import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/**
 * The lowest port the kernel hands out for a bind to port 0 (Linux's ip_local_port_range; 32768 by
 * default, and elsewhere 49152, IANA's start of the dynamic range).
 */
function ephemeralLow(): number {
  try {
    return Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || 49152;
  } catch {
    return 49152;
  }
}

const listenable = (port: number) =>
  new Promise<boolean>((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });

/**
 * A local TCP port nothing listens on. Below the ephemeral range: a port taken with port 0 and released
 * could be handed to the next `listen(0)` of a test running beside (an `orderly serve`), which would then
 * answer where the test expects a refused connection; a port the kernel never picks by itself stays closed.
 */
export async function closedPort(): Promise<number> {
  const high = ephemeralLow() - 1;
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * (high - 20_000));
    if (await listenable(port)) return port;
  }
}
