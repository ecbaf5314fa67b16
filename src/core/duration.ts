import { InvalidArgumentError } from './errors.js';

/** Pub/Sub writes durations as `"600s"` (proto3 JSON); people write `10m`. Both become seconds. */
export type DurationInput = number | string | { seconds?: number | string; nanos?: number };

const UNIT_SECONDS: Record<string, number> = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86400 };

export function parseDuration(field: string, value: DurationInput): number {
  if (typeof value === 'number') {
    if (Number.isFinite(value) && value >= 0) return value;
  } else if (typeof value === 'string') {
    const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(value);
    if (m) return Number(m[1]) * UNIT_SECONDS[m[2] ?? 's']!;
  } else if (value && typeof value === 'object') {
    const seconds = Number(value.seconds ?? 0) + (value.nanos ?? 0) / 1e9;
    if (Number.isFinite(seconds) && seconds >= 0) return seconds;
  }
  throw new InvalidArgumentError(field, `not a duration: ${JSON.stringify(value)} (use e.g. "600s", "10m" or a number of seconds)`);
}

export function formatDuration(seconds: number): string {
  return `${Number(seconds.toFixed(9))}s`;
}

export function checkRange(field: string, seconds: number, min: number, max: number): number {
  if (seconds < min || seconds > max) {
    throw new InvalidArgumentError(
      field,
      `must be between ${formatDuration(min)} and ${formatDuration(max)}, got ${formatDuration(seconds)}`,
    );
  }
  return seconds;
}
