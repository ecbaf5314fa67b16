import type { SubscriptionSpec } from './subscription-config.js';

/**
 * Push and export subscriptions get a default backoff when no retryPolicy is set (Pub/Sub backs off
 * push and export deliveries too), so a failing endpoint or sink is not retried in a tight loop.
 */
const DEFAULT_BACKOFF = { minimumBackoff: 0.1, maximumBackoff: 60 };

/**
 * Delay before a failed message (and, on ordered subscriptions, its key) is delivered again: exponential
 * in the number of failures, `minimumBackoff * 2^(failures-1)` capped at `maximumBackoff`; none without a
 * retryPolicy (Pub/Sub redelivers at once). A push is never retried sooner than the default backoff, as
 * Pub/Sub's push backoff (100 ms to 60 s) holds whatever the retryPolicy: with a policy of 0 s a failing
 * endpoint took thousands of requests a second.
 */
export function retryDelayMs(spec: SubscriptionSpec, failures: number): number {
  if (failures <= 0) return 0;
  const delivered = spec.pushConfig || spec.bigqueryConfig || spec.cloudStorageConfig || spec.exportConfig;
  const policy = spec.retryPolicy ?? (delivered ? DEFAULT_BACKOFF : undefined);
  const delay = policy ? backoffMs(policy, failures) : 0;
  return spec.pushConfig ? Math.max(delay, backoffMs(DEFAULT_BACKOFF, failures)) : delay;
}

function backoffMs(policy: { minimumBackoff: number; maximumBackoff: number }, failures: number): number {
  const seconds = Math.min(policy.maximumBackoff, policy.minimumBackoff * 2 ** Math.min(failures - 1, 30));
  return Math.round(seconds * 1000);
}
