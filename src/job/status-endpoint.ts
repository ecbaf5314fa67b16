/**
 * How long `orderly status` waits for a running process's /status. A process that is stopped (SIGSTOP,
 * a debugger) or wedged accepts the connection and never answers: fetch alone waited 300 s for it.
 */
const STATUS_TIMEOUT_MS = 5_000;

/** The /status of the process whose metrics endpoint is `metrics` (`http://host:port`). */
export async function readStatus<T>(metrics: string, authToken?: string, timeoutMs = STATUS_TIMEOUT_MS): Promise<T> {
  try {
    const headers: Record<string, string> = authToken === undefined ? {} : { authorization: `Bearer ${authToken}` };
    const res = await fetch(`${metrics}/status`, { headers, signal: AbortSignal.timeout(timeoutMs) });
    // Never the body of a refusal (or of a proxy's error page) taken for the status.
    if (!res.ok) throw new Error(`${metrics}/status answered HTTP ${res.status}${res.status === 401 ? ' (metrics.authToken)' : ''}`);
    return (await res.json()) as T;
  } catch (e) {
    if ((e as Error).name !== 'TimeoutError') throw e;
    throw new Error(`${metrics}/status did not answer within ${timeoutMs / 1000} s (is the process stopped or overloaded?)`, { cause: e });
  }
}
