import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/** The ports the kernel hands out for a bind to port 0 (Linux's ip_local_port_range; elsewhere IANA's dynamic range). */
function ephemeralRange(): [number, number] {
  try {
    const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (low && high) return [low, high];
  } catch {
    // Not Linux: IANA's range below.
  }
  return [49152, 65535];
}

const listenable = (port: number) =>
  new Promise<boolean>((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });

/**
 * A local TCP port nothing listens on. Outside the ephemeral range: a port taken with port 0 and released
 * could be handed to the next `listen(0)` of a test running beside (an `orderly serve`), which would then
 * answer where the test expects a refused connection; a port the kernel never picks by itself stays closed.
 */
export async function closedPort(): Promise<number> {
  const [low, high] = ephemeralRange();
  // Below the range if it leaves room there (from 10000: clear of the well-known ports a test or a service
  // may take by number, 8085, 9000, ...), else above it.
  const [from, to] = low > 11_000 ? [10_000, low - 1] : high < 65535 - 1024 ? [high + 1, 65535] : [];
  if (from === undefined || to === undefined)
    throw new Error(`no ports outside the ephemeral range ${low}-${high} to pick a closed one from`);
  for (;;) {
    const port = from + Math.floor(Math.random() * (to - from + 1));
    if (await listenable(port)) return port;
  }
}
