import { InvalidArgumentError } from './errors.js';

/**
 * Resources are named as Pub/Sub names them (`projects/P/topics/T`, `projects/P/subscriptions/S`,
 * `projects/P/snapshots/S`); a bare id is taken to be in the core's default project.
 */
export type ResourceKind = 'topics' | 'subscriptions' | 'snapshots';

const ID = /^[A-Za-z][A-Za-z0-9\-_.~+%]{2,254}$/;
/** A project id as the API takes it: Pub/Sub's own are 6-30 of [a-z0-9-], but any printable run up to 255 passes (`p`, `example.com:proj`). */
const PROJECT = /^(?!\.\.?$)[^\s\p{Cc}\p{Cs}/]{1,255}$/u;

/**
 * Refuses a project that no name should carry: longer than 255 characters (a request could make it
 * megabytes, stored and then echoed in every list and label), or with control characters, whitespace or
 * a lone surrogate (newlines in names reach logs and tables), or `.` or `..`, which no URL can address
 * (the REST path `projects/../topics/t` is `topics/t`), so REST could never reach what gRPC made.
 */
export function checkProject(project: string, field: string): void {
  if (!PROJECT.test(project))
    throw new InvalidArgumentError(
      field,
      `invalid project ${JSON.stringify(project.length > 64 ? `${project.slice(0, 64)}...` : project)} (${project.length} characters): ` +
        'at most 255 characters, without whitespace or control characters, and not "." or ".."',
    );
}

export function resourceName(kind: ResourceKind, nameOrId: string, defaultProject: string, field = 'name'): string {
  const full = /^projects\/([^/]+)\/(topics|subscriptions|snapshots)\/([^/]+)$/.exec(nameOrId);
  const project = full ? full[1]! : defaultProject;
  const id = full ? full[3]! : nameOrId;
  if (full && full[2] !== kind) throw new InvalidArgumentError(field, `expected a ${kind.slice(0, -1)} name, got ${nameOrId}`);
  if (nameOrId.includes('/') && !full) {
    throw new InvalidArgumentError(field, `expected projects/{project}/${kind}/{id} or a bare id, got ${JSON.stringify(nameOrId)}`);
  }
  if (full) checkProject(project, field);
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
