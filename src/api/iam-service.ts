import { InvalidArgumentError, NotFoundError } from '../core/errors.js';
import type { PubSubCore } from '../core/pubsub-core.js';
import { parseSchemaName } from '../schema/schema-name.js';
import { policyFromProto, policyToProto } from './proto-mapping.js';
import type { IamPolicyRequests } from './pubsub-messages.js';
import { required, serviceHandlers, type RpcHandler } from './rpc.js';

/**
 * The Pub/Sub resources that carry IAM policies: how a name of each is checked (its id's rules, errors
 * naming `resource`, the request's field) and how to tell that one exists.
 */
const KINDS: Record<
  string,
  { label: string; check(core: PubSubCore, name: string): void; exists(core: PubSubCore, name: string): boolean }
> = {
  topics: { label: 'Topic', check: (core, name) => core.topicName(name, 'resource'), exists: (core, name) => core.hasTopic(name) },
  subscriptions: {
    label: 'Subscription',
    check: (core, name) => core.subscriptionName(name, 'resource'),
    exists: (core, name) => core.hasSubscription(name),
  },
  snapshots: {
    label: 'Snapshot',
    check: (core, name) => core.snapshotName(name, 'resource'),
    exists: (core, name) => core.hasSnapshot(name),
  },
  schemas: { label: 'Schema', check: (_core, name) => parseSchemaName(name, 'resource'), exists: (core, name) => core.schemas.has(name) },
};

/**
 * google.iam.v1.IAMPolicy for topics, subscriptions, snapshots and schemas, answered as a single-user
 * local system would (see IamPolicies): policies are stored and returned, never enforced, and
 * TestIamPermissions grants every permission asked on a resource that exists (none on one that does not).
 */
export function iamHandlers(core: PubSubCore): Record<string, RpcHandler> {
  /** The well-formed name in `resource`, and whether the resource it names exists. */
  const named = (r: { resource?: unknown }): { name: string; label: string; exists: boolean } => {
    const name = r.resource;
    const m = typeof name === 'string' ? /^projects\/[^/]+\/(topics|subscriptions|snapshots|schemas)\/[^/]+$/.exec(name) : null;
    if (!m)
      throw new InvalidArgumentError(
        'resource',
        `expected a Pub/Sub topic, subscription, snapshot or schema name, got ${JSON.stringify(name) ?? String(name)}`,
      );
    const kind = KINDS[m[1]!]!;
    kind.check(core, name as string);
    return { name: name as string, label: kind.label, exists: kind.exists(core, name as string) };
  };
  const existing = (r: { resource?: unknown }): string => {
    const { name, label, exists } = named(r);
    if (!exists) throw new NotFoundError(label, name);
    return name;
  };
  return serviceHandlers<IamPolicyRequests>({
    GetIamPolicy: async (r) => policyToProto(core.iam.read(existing(r), r.options?.requestedPolicyVersion ?? 0)),
    SetIamPolicy: async (r) => {
      const name = existing(r);
      const mask = r.updateMask ? r.updateMask.paths.map((p) => p.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase())) : [];
      return policyToProto(await core.iam.set(name, policyFromProto(required(r.policy, 'policy')), mask));
    },
    TestIamPermissions: async (r) => {
      const { exists } = named(r);
      // As IAM refuses them: granting "*" back would tell the caller it may do anything, of any service.
      r.permissions.forEach((p, i) => {
        if (p.includes('*')) throw new InvalidArgumentError(`permissions[${i}]`, `wildcards are not allowed, got ${JSON.stringify(p)}`);
      });
      // Pub/Sub answers a resource that does not exist with no permissions, not NOT_FOUND: a
      // permission-aware tool asks before the resource is there.
      return { permissions: exists ? r.permissions : [] };
    },
  });
}
