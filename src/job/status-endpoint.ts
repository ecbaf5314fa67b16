/**
 * How long `orderly status` waits for a running process's /status. A process that is stopped (SIGSTOP,
 * a debugger) or wedged accepts the connection and never answers: fetch alone waited 300 s for it.
 */
const STATUS_TIMEOUT_MS = 5_000;

/** The /status of the process whose metrics endpoint is `metrics` (`http://host:port`). */
export async function readStatus<T>(metrics: string, timeoutMs = STATUS_TIMEOUT_MS): Promise<T> {
  try {
    const res = await fetch(`${metrics}/status`, { signal: AbortSignal.timeout(timeoutMs) });
    return (await res.json()) as T;
  } catch (e) {
    if ((e as Error).name !== 'TimeoutError') throw e;
    throw new Error(`${metrics}/status did not answer within ${timeoutMs / 1000} s (is the process stopped or overloaded?)`, { cause: e });
  }
}
