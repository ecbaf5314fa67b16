import type { Logger } from '../log.js';
import { StoreFullError } from '../store/store.js';

/** While the store's disk stays full, one line per this long (a client retrying refused writes would flood the log). */
const STORE_FULL_LOG_INTERVAL_MS = 30_000;

/** Per logger (per server): when the last line was written, and the refusals since. */
const noted = new WeakMap<Logger, { loggedAt: number; refused: number }>();

/**
 * Logs that a request was refused because the store's disk is full. The client gets RESOURCE_EXHAUSTED
 * and (Google's clients) retries: without this the server's log said nothing, however long publishes and
 * acks were refused. Any other error is left to the caller.
 */
export function noteStoreFull(e: unknown, logger: Logger | undefined, where: string): void {
  if (!(e instanceof StoreFullError) || !logger) return;
  const state = noted.get(logger) ?? { loggedAt: -Infinity, refused: 0 };
  noted.set(logger, state);
  state.refused++;
  const now = Date.now();
  if (now - state.loggedAt < STORE_FULL_LOG_INTERVAL_MS) return;
  logger.error(
    { file: e.file, refused: state.refused, where },
    'the store cannot take writes: its disk is full; publishes and acks are refused (RESOURCE_EXHAUSTED) until space is freed',
  );
  state.loggedAt = now;
  state.refused = 0;
}
