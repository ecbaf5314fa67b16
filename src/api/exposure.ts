import { isIP } from 'node:net';
import { OrderlyError } from '../core/errors.js';

/** Tokens shorter than this are refused: the endpoint may face a network, where short tokens can be guessed. */
export const MIN_TOKEN_LENGTH = 16;

/** What an `authorization: Bearer <token>` header (and gRPC metadata) can carry as one token: visible ASCII, no spaces. */
const TOKEN_CHARACTERS = /^[\x21-\x7e]+$/;

/** Whether `host` is a loopback address: only the same machine can connect. Names other than localhost count as remote. */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (h === 'localhost') return true;
  if (isIP(h) === 4) return h.startsWith('127.');
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(h);
  if (mapped) return mapped[1]!.startsWith('127.');
  return isIP(h) === 6 && /^(0*:)*:?0*1$/.test(h);
}

/**
 * The token in ORDERLY_TOKEN. Set but empty (`ORDERLY_TOKEN=` in a unit file, or a shell's `$(cat missing-file)`)
 * counts as unset, as `${VAR:-...}` does: no token on loopback, a refusal off it, instead of "too short".
 */
export function tokenFromEnvironment(): string | undefined {
  return process.env.ORDERLY_TOKEN || undefined;
}

export interface Exposure {
  host: string;
  allowRemote?: boolean;
  authToken?: string;
}

/**
 * The endpoint speaks to the network only when asked twice: an explicit opt-in and a token. `flags`
 * names the settings as the user wrote them (CLI options or job-file fields) for the message.
 */
export function checkExposure(e: Exposure, flags: { allowRemote: string; authToken: string }): void {
  if (e.authToken !== undefined && e.authToken.length < MIN_TOKEN_LENGTH) {
    throw new OrderlyError('INVALID_ARGUMENT', `${flags.authToken}: the token must be at least ${MIN_TOKEN_LENGTH} characters long`);
  }
  // A token with a space (or a character a header cannot carry) was taken, and then no call could send it: every one was 401.
  if (e.authToken !== undefined && !TOKEN_CHARACTERS.test(e.authToken)) {
    throw new OrderlyError(
      'INVALID_ARGUMENT',
      `${flags.authToken}: the token must be printable ASCII without spaces, as "authorization: Bearer <token>" carries it (e.g. openssl rand -hex 24)`,
    );
  }
  if (isLoopback(e.host)) return;
  if (!e.allowRemote || !e.authToken) {
    throw new OrderlyError(
      'INVALID_ARGUMENT',
      `refusing to serve on ${e.host}, which is reachable from other machines: that needs both ${flags.allowRemote} and a token (${flags.authToken}); ` +
        'or bind 127.0.0.1',
    );
  }
}

/** `host:port` as a URL or PUBSUB_EMULATOR_HOST spells it: an IPv6 address in brackets (`[::1]:8085`). */
export function hostPort(host: string, port: number): string {
  return isIP(host) === 6 ? `[${host}]:${port}` : `${host}:${port}`;
}

/**
 * Where a client on this machine reaches a server bound to `host`: the loopback address for a bind to every
 * interface (0.0.0.0, ::), which is a listening address, not one to dial (Windows and macOS refuse to connect
 * to it; PUBSUB_EMULATOR_HOST=0.0.0.0:8085 fails there).
 */
export function localHostPort(host: string, port: number): string {
  const bare = host.replace(/^\[|\]$/g, '');
  if (bare === '0.0.0.0') return hostPort('127.0.0.1', port);
  if (isIP(bare) === 6 && /^[0:]*$/.test(bare)) return hostPort('::1', port);
  return hostPort(bare, port);
}
