import { createHash } from 'node:crypto';
import type { SubscriptionIdentity } from '../../core/pubsub-core.js';

// Apart from remote-endpoint.ts: jobs, audits and queries name remote subscriptions without loading Google's
// client, which that module loads (half a second of start-up for every command).

/** `projects/<p>/subscriptions/<id>` for a full name or a bare id in the endpoint's project. */
export function remoteSubscriptionName(ref: string, projectId: string): string {
  return ref.startsWith('projects/') ? ref : `projects/${projectId}/subscriptions/${ref}`;
}

/**
 * A remote subscription's identity: the same on every worker of a fleet (sinks key shared progress by
 * it), different for every subscription. Pub/Sub gives a subscription created again under the same name
 * no new identity, so neither can Orderly: its sink progress carries over (messages are recognised by id).
 */
export function remoteIdentity(subscription: string): SubscriptionIdentity {
  return { uid: `remote-${createHash('sha256').update(subscription).digest('hex').slice(0, 16)}`, adoptsNameKeyedProgress: false };
}
