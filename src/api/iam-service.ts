import { InvalidArgumentError, NotFoundError } from '../core/errors.js';
import type { PubSubCore } from '../core/pubsub-core.js';
import { policyFromProto, policyToProto } from './proto-mapping.js';
import type { IamPolicyRequests } from './pubsub-messages.js';
import { required, serviceHandlers, type RpcHandler } from './rpc.js';

/** The Pub/Sub resources that carry IAM policies, and how to tell that one exists. */
const KINDS: Record<string, { label: string; exists(core: PubSubCore, name: string): boolean }> = {
  topics: { label: 'Topic', exists: (core, name) => core.hasTopic(name) },
  subscriptions: { label: 'Subscription', exists: (core, name) => core.hasSubscription(name) },
  snapshots: { label: 'Snapshot', exists: (core, name) => core.hasSnapshot(name) },
  schemas: { label: 'Schema', exists: (core, name) => core.schemas.has(name) },
};

/**
 * google.iam.v1.IAMPolicy for topics, subscriptions, snapshots and schemas, answered as a single-user
 * local system would (see IamPolicies): policies are stored and returned, never enforced, and
 * TestIamPermissions grants every permission asked.
 */
export function iamHandlers(core: PubSubCore): Record<string, RpcHandler> {
  const resource = (r: { resource?: unknown }): string => {
    const name = r.resource;
    const m = typeof name === 'string' ? /^projects\/[^/]+\/(topics|subscriptions|snapshots|schemas)\/[^/]+$/.exec(name) : null;
    if (!m)
      throw new InvalidArgumentError(
        'resource',
        `expected a Pub/Sub topic, subscription, snapshot or schema name, got ${JSON.stringify(name) ?? String(name)}`,
      );
    const kind = KINDS[m[1]!]!;
    if (!kind.exists(core, name as string)) throw new NotFoundError(kind.label, name as string);
    return name as string;
  };
  return serviceHandlers<IamPolicyRequests>({
    GetIamPolicy: async (r) => policyToProto(core.iam.read(resource(r), r.options?.requestedPolicyVersion ?? 0)),
    SetIamPolicy: async (r) => {
      const name = resource(r);
      const mask = r.updateMask ? r.updateMask.paths.map((p) => p.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase())) : [];
      return policyToProto(await core.iam.set(name, policyFromProto(required(r.policy, 'policy')), mask));
    },
    TestIamPermissions: async (r) => {
      resource(r);
      // As IAM refuses them: granting "*" back would tell the caller it may do anything, of any service.
      r.permissions.forEach((p, i) => {
        if (p.includes('*')) throw new InvalidArgumentError(`permissions[${i}]`, `wildcards are not allowed, got ${JSON.stringify(p)}`);
      });
      return { permissions: r.permissions };
    },
  });
}
