import { createHash, randomBytes } from 'node:crypto';
import type { Store } from '../store/store.js';
import { InvalidArgumentError, OrderlyError } from './errors.js';

/**
 * IAM policies (google.iam.v1 GetIamPolicy / SetIamPolicy / TestIamPermissions) as a single-user local
 * system answers them: a policy set on a topic, subscription, snapshot or schema is stored and returned
 * as it was set (with a new etag), but Orderly enforces none of it — whoever reaches the endpoint may do
 * everything, so TestIamPermissions grants every permission asked. Code that reads, writes or checks
 * permissions at start-up runs unchanged. A resource's policy goes with the resource.
 */
export interface IamPolicy {
  version: number;
  bindings: IamBinding[];
  auditConfigs: unknown[];
  /** base64 of the policy's etag bytes. */
  etag: string;
}

export interface IamBinding {
  role: string;
  members: string[];
  condition?: unknown;
}

/** What GetIamPolicy returns for a resource no policy was set on: Google's empty policy. */
const EMPTY_ETAG = 'ACAB';

const MEMBER =
  /^(allUsers|allAuthenticatedUsers|(user|serviceAccount|group|domain|principal|principalSet|deleted:user|deleted:serviceAccount|deleted:group):\S+)$/;
const ROLE = /^(roles\/[A-Za-z0-9_.]+|(projects|organizations)\/[^/]+\/roles\/[A-Za-z0-9_.]+)$/;
const MASK_FIELDS = new Set(['bindings', 'etag', 'auditConfigs', 'version']);
/** What marks a conditional binding's role in the version 1 view of a policy (IAM's own marker). */
const WITHCOND = '_withcond_';

export class IamPolicies {
  private readonly policies = new Map<string, IamPolicy>();

  constructor(private readonly store: Store) {}

  async load(): Promise<void> {
    for (const row of await this.store.listIamPolicies()) this.policies.set(row.resource, row.policy as IamPolicy);
  }

  get(resource: string): IamPolicy {
    return this.policies.get(resource) ?? { version: 0, bindings: [], auditConfigs: [], etag: EMPTY_ETAG };
  }

  /**
   * The policy as GetIamPolicy returns it to a caller that reads up to `requestedVersion`
   * (GetPolicyOptions.requestedPolicyVersion: 0, 1 or 3). Below 3 a policy with conditional bindings is
   * shown as IAM shows it: version 1, each conditional binding's condition hidden and its role marked
   * `<role>_withcond_<hash>`, so a version 1 reader neither takes it for an unconditional grant nor can
   * set it back as one (see `set`).
   */
  read(resource: string, requestedVersion: number): IamPolicy {
    if (![0, 1, 3].includes(requestedVersion))
      throw new InvalidArgumentError('options.requestedPolicyVersion', `must be 0, 1 or 3, got ${requestedVersion}`);
    const policy = this.get(resource);
    if (requestedVersion === 3 || conditionalBinding(policy) < 0) return policy;
    const bindings = policy.bindings.map((b) =>
      b.condition === undefined || b.condition === null
        ? b
        : { role: `${b.role}${WITHCOND}${conditionHash(b.condition)}`, members: b.members },
    );
    return { ...policy, version: 1, bindings };
  }

  /**
   * Replaces the fields of `updateMask` (default `bindings` and `etag`, as IAM does). An etag that is
   * not the current one is ABORTED: the policy changed since the caller read it.
   */
  async set(resource: string, policy: IamPolicy, updateMask: string[] = []): Promise<IamPolicy> {
    const current = this.get(resource);
    if (policy.etag && policy.etag !== current.etag) {
      throw new OrderlyError(
        'ABORTED',
        `policy.etag: the policy of ${resource} changed since it was read (etag ${current.etag}, got ${policy.etag}); read it again and retry`,
      );
    }
    const paths = updateMask.length ? updateMask : ['bindings', 'etag'];
    for (const p of paths)
      if (!MASK_FIELDS.has(p))
        throw new InvalidArgumentError(
          'updateMask',
          `unknown policy field path ${JSON.stringify(p)} (known: bindings, etag, auditConfigs, version)`,
        );
    const givesBindings = paths.includes('bindings');
    // IAM: with an etag, changing the bindings of a policy that has conditions takes version 3 (without
    // one, a version 1 policy may overwrite it, conditions and all).
    if (policy.etag && givesBindings && policy.version !== 3 && conditionalBinding(current) >= 0)
      throw new InvalidArgumentError(
        'policy.version',
        `the policy of ${resource} has conditional bindings: changing its bindings takes version 3, got version ${policy.version}`,
      );
    // Only what the mask names is checked, and then the policy it makes: a mask of `version` alone must
    // not leave conditional bindings in a version 1 policy, nor fields it leaves out be judged.
    if (givesBindings) checkBindings(policy.bindings);
    const next: IamPolicy = {
      version: paths.includes('version') || policy.version ? policy.version : current.version,
      // A binding that names no member grants nothing, and IAM keeps no such binding: the policy it
      // answers with (and GetIamPolicy) leaves it out.
      bindings: givesBindings ? policy.bindings.filter((b) => b.members.length > 0) : current.bindings,
      auditConfigs: paths.includes('auditConfigs') ? policy.auditConfigs : current.auditConfigs,
      etag: randomBytes(8).toString('base64'),
    };
    checkVersion(next, givesBindings);
    await this.store.putIamPolicy(resource, next);
    this.policies.set(resource, next);
    return next;
  }

  /** Drops the policies of the resources `gone` says no longer exist (snapshots that expired). */
  async dropWhere(gone: (resource: string) => boolean): Promise<void> {
    for (const resource of [...this.policies.keys()]) if (gone(resource)) await this.drop(resource);
  }

  /** The resource was deleted: its policy goes too. */
  async drop(resource: string): Promise<void> {
    if (!this.policies.has(resource)) return;
    await this.store.putIamPolicy(resource, undefined);
    this.policies.delete(resource);
  }
}

/**
 * google.iam.v1.Policy.version: 0, 1 or 3, and 3 for a policy with conditional bindings. A violation is
 * blamed on the bindings given (`givesBindings`), else on the version that no longer fits the stored ones.
 */
function checkVersion(policy: IamPolicy, givesBindings: boolean): void {
  const version = policy.version ?? 0;
  if (![0, 1, 3].includes(version)) throw new InvalidArgumentError('policy.version', `must be 0, 1 or 3, got ${version}`);
  const conditional = conditionalBinding(policy);
  if (conditional >= 0 && version !== 3)
    throw new InvalidArgumentError(
      givesBindings ? `policy.bindings[${conditional}].condition` : 'policy.version',
      `a policy with conditional bindings must be version 3, got version ${version}`,
    );
}

/** The index of the policy's first binding with a condition, or -1. */
function conditionalBinding(policy: IamPolicy): number {
  return policy.bindings.findIndex((b) => b.condition !== undefined && b.condition !== null);
}

/** An opaque 20 hex digits naming a condition, as IAM's `_withcond_` suffixes are. */
function conditionHash(condition: unknown): string {
  return createHash('sha256').update(JSON.stringify(condition)).digest('hex').slice(0, 20);
}

function checkBindings(bindings: IamBinding[]): void {
  bindings.forEach((b, i) => {
    if (b.role.includes(WITHCOND))
      throw new InvalidArgumentError(
        `policy.bindings[${i}].role`,
        `${JSON.stringify(b.role)} is the version 1 view of a conditional binding; read the policy with options.requestedPolicyVersion 3 and set it as version 3`,
      );
    if (!ROLE.test(b.role))
      throw new InvalidArgumentError(
        `policy.bindings[${i}].role`,
        `must be a role like "roles/pubsub.subscriber", got ${JSON.stringify(b.role)}`,
      );
    b.members.forEach((m, j) => {
      if (!MEMBER.test(m))
        throw new InvalidArgumentError(
          `policy.bindings[${i}].members[${j}]`,
          `must be a principal like "user:ada@example.com", got ${JSON.stringify(m)}`,
        );
    });
  });
}
