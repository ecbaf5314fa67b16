import { InvalidArgumentError } from './errors.js';

/** Pub/Sub writes durations as `"600s"` (proto3 JSON); people write `10m`. Both become seconds. */
export type DurationInput = number | string | { seconds?: number | string; nanos?: number };

const UNIT_SECONDS: Record<string, number> = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86400 };

export function parseDuration(field: string, value: DurationInput): number {
  const seconds =
    typeof value === 'number'
      ? value
      : value && typeof value === 'object'
        ? Number(value.seconds ?? 0) + (value.nanos ?? 0) / 1e9
        : undefined;
  if (seconds !== undefined && Number.isFinite(seconds)) {
    // A protobuf Duration may be negative; no duration of Pub/Sub's is.
    if (seconds < 0) throw new InvalidArgumentError(field, `must not be negative, got ${formatDuration(seconds)}`);
    return seconds;
  }
  if (typeof value === 'string') {
    const m = /^\s*(-?)\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(value);
    if (m?.[1]) throw new InvalidArgumentError(field, `must not be negative, got ${JSON.stringify(value)}`);
    if (m) return Number(m[2]) * UNIT_SECONDS[m[3] ?? 's']!;
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
