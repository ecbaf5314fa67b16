import type { SubscriptionSpec } from './subscription-config.js';

/** Push endpoints get Pub/Sub's own push backoff when no retryPolicy is set, so a dead endpoint is not hammered. */
const PUSH_MIN_SECONDS = 0.1;
const PUSH_MAX_SECONDS = 60;

/**
 * Delay before a failed message (and, on ordered subscriptions, its key) is delivered again: exponential
 * in the number of failures, `minimumBackoff * 2^(failures-1)` capped at `maximumBackoff`; none without a
 * retryPolicy (Pub/Sub redelivers at once).
 */
export function retryDelayMs(spec: SubscriptionSpec, failures: number): number {
  const policy = spec.retryPolicy ?? (spec.pushConfig ? { minimumBackoff: PUSH_MIN_SECONDS, maximumBackoff: PUSH_MAX_SECONDS } : undefined);
  if (!policy || failures <= 0) return 0;
  const seconds = Math.min(policy.maximumBackoff, policy.minimumBackoff * 2 ** Math.min(failures - 1, 30));
  return Math.round(seconds * 1000);
}
