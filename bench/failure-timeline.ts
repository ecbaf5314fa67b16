import { clockMs } from './latency-pace.js';

/**
 * Failed deliveries (nacks + lease expiries) a server counted, sampled over time. A sample holds the count
 * as it was at some moment between its read's start and its answer being seen here, and a busy event loop
 * (seconds, in the latency benchmark's one-process row) can lie between the two: it tells what happened
 * before its answer was seen, and nothing earlier than its start.
 */
export class FailureTimeline {
  private readonly samples: { from: number; to: number; failures: number }[] = [];
  private timer?: NodeJS.Timeout;
  private sampling?: Promise<void>;

  constructor(
    private readonly read: () => Promise<number>,
    private readonly everyMs: number,
    private readonly now: () => number = clockMs,
  ) {}

  async start(): Promise<void> {
    await this.sample();
    this.timer = setInterval(() => {
      // A sample that fails (an overloaded server not answering) is skipped: the samples around the gap
      // then bound a wider window, which can only make a duplicate look explained, never the reverse.
      this.sampling ??= this.sample()
        .catch(() => undefined)
        .finally(() => (this.sampling = undefined));
    }, this.everyMs);
  }

  /** Takes one sample (the timer takes them one at a time, so they come in order of start and of answer). */
  async sample(): Promise<void> {
    const from = this.now();
    const failures = await this.read();
    this.samples.push({ from, to: this.now(), failures });
  }

  /** Failures counted by the last sample answered at or before `t` (all that happened before it, at least). */
  atOrBefore(t: number): number {
    let value = this.samples[0]!.failures;
    for (const s of this.samples) {
      if (s.to > t) break;
      value = s.failures;
    }
    return value;
  }

  /**
   * Failures counted by the first sample started at or after `t` (everything that happened up to `t`
   * included): one started earlier and answered later may hold a count from before `t`.
   */
  atOrAfter(t: number): number {
    return (this.samples.find((s) => s.from >= t) ?? this.samples[this.samples.length - 1]!).failures;
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.sampling;
    await this.sample();
  }
}
