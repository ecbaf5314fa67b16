/** Most push requests a subscription has out at once. */
const MAX_PUSH_WINDOW = 100;
const FIRST_PAUSE_MS = 100;
const LONGEST_PAUSE_MS = 60_000;

/**
 * How many push requests a subscription may start now, as Pub/Sub's push flow control and push backoff
 * decide it for the whole subscription: a failed push halves the window (down to one request) and pauses
 * all pushing for 100 ms, doubling with each failure in a row up to 60 s; a success widens the window by
 * one and ends the run of failures. The per-message retry backoff alone did not protect a failing
 * endpoint: each message of a backlog was tried once at full speed before any of them waited, thousands
 * of requests a second.
 */
export class PushWindow {
  private size = MAX_PUSH_WINDOW;
  private failuresInARow = 0;
  private pausedUntil = 0;

  /** Requests that may start now, given `inflight` out. */
  room(inflight: number, now: number): number {
    return now < this.pausedUntil ? 0 : Math.max(0, this.size - inflight);
  }

  succeeded(): void {
    this.size = Math.min(MAX_PUSH_WINDOW, this.size + 1);
    this.failuresInARow = 0;
  }

  /**
   * Records a failed push and returns the pause it starts, in ms (0 if one runs already: the requests of a
   * burst that fail together are one failure of the endpoint, not a run that would jump to the longest pause).
   */
  failed(now: number): number {
    this.size = Math.max(1, Math.floor(this.size / 2));
    if (now < this.pausedUntil) return 0;
    this.failuresInARow++;
    const pause = Math.min(LONGEST_PAUSE_MS, FIRST_PAUSE_MS * 2 ** Math.min(this.failuresInARow - 1, 30));
    this.pausedUntil = now + pause;
    return pause;
  }
}
