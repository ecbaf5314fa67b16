import { InvalidArgumentError } from './errors.js';

/**
 * Resources are named as Pub/Sub names them (`projects/P/topics/T`, `projects/P/subscriptions/S`,
 * `projects/P/snapshots/S`); a bare id is taken to be in the core's default project.
 */
export type ResourceKind = 'topics' | 'subscriptions' | 'snapshots';

const ID = /^[A-Za-z][A-Za-z0-9\-_.~+%]{2,254}$/;

export function resourceName(kind: ResourceKind, nameOrId: string, defaultProject: string, field = 'name'): string {
  const full = /^projects\/([^/]+)\/(topics|subscriptions|snapshots)\/([^/]+)$/.exec(nameOrId);
  const project = full ? full[1]! : defaultProject;
  const id = full ? full[3]! : nameOrId;
  if (full && full[2] !== kind) throw new InvalidArgumentError(field, `expected a ${kind.slice(0, -1)} name, got ${nameOrId}`);
  if (nameOrId.includes('/') && !full) {
    throw new InvalidArgumentError(field, `expected projects/{project}/${kind}/{id} or a bare id, got ${JSON.stringify(nameOrId)}`);
  }
  if (!ID.test(id) || id.startsWith('goog')) {
    throw new InvalidArgumentError(
      field,
      `invalid id ${JSON.stringify(id)}: 3-255 characters, starting with a letter, of letters, digits and - _ . ~ + %, not starting with "goog"`,
    );
  }
  return `projects/${project}/${kind}/${id}`;
}

export function shortId(name: string): string {
  return name.slice(name.lastIndexOf('/') + 1);
}

export function projectOf(name: string): string {
  return name.split('/')[1] ?? '';
}
