import type { SubscriptionSpec } from './subscription-config.js';

/**
 * Push and export subscriptions get a default backoff when no retryPolicy is set (Pub/Sub backs off
 * push and export deliveries too), so a failing endpoint or sink is not retried in a tight loop.
 */
const DEFAULT_MIN_SECONDS = 0.1;
const DEFAULT_MAX_SECONDS = 60;

/**
 * Delay before a failed message (and, on ordered subscriptions, its key) is delivered again: exponential
 * in the number of failures, `minimumBackoff * 2^(failures-1)` capped at `maximumBackoff`; none without a
 * retryPolicy (Pub/Sub redelivers at once).
 */
export function retryDelayMs(spec: SubscriptionSpec, failures: number): number {
  const delivered = spec.pushConfig || spec.bigqueryConfig || spec.cloudStorageConfig || spec.exportConfig;
  const policy = spec.retryPolicy ?? (delivered ? { minimumBackoff: DEFAULT_MIN_SECONDS, maximumBackoff: DEFAULT_MAX_SECONDS } : undefined);
  if (!policy || failures <= 0) return 0;
  const seconds = Math.min(policy.maximumBackoff, policy.minimumBackoff * 2 ** Math.min(failures - 1, 30));
  return Math.round(seconds * 1000);
}
