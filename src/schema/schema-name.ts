import { InvalidArgumentError } from '../core/errors.js';
import { checkProject } from '../core/names.js';

/**
 * Schema resource names as Pub/Sub spells them: `projects/{project}/schemas/{schema}`, where a revision
 * is addressed as `projects/{project}/schemas/{schema}@{revisionId}`. A schema id follows the rules of
 * every Pub/Sub resource id: 3-255 characters, starting with a letter, of letters, digits and
 * `- _ . ~ + %`, not starting with `goog`.
 */
export interface SchemaName {
  /** `projects/P/schemas/S`, without a revision. */
  name: string;
  project: string;
  id: string;
  revisionId?: string;
}

/** What a topic's `schemaSettings.schema` reads once its schema is deleted. */
export const DELETED_SCHEMA = '_deleted-schema_';

const ID = /^[A-Za-z][A-Za-z0-9\-_.~+%]{2,254}$/;
const NAME = /^projects\/([^/@]+)\/schemas\/([^/@]+)(?:@([^/@]*))?$/;

export function parseSchemaName(value: unknown, field: string, allowRevision = false): SchemaName {
  const m = typeof value === 'string' ? NAME.exec(value) : null;
  if (!m)
    throw new InvalidArgumentError(
      field,
      `expected projects/{project}/schemas/{schema}${allowRevision ? '[@{revisionId}]' : ''}, got ${JSON.stringify(value) ?? String(value)}`,
    );
  const [, project, id, revisionId] = m;
  checkProject(project!, field);
  checkSchemaId(id!, field);
  if (revisionId !== undefined && !allowRevision)
    throw new InvalidArgumentError(field, `names a schema, not a revision; remove "@${revisionId}"`);
  if (revisionId === '') throw new InvalidArgumentError(field, 'a revision id is missing after "@"');
  return { name: `projects/${project}/schemas/${id}`, project: project!, id: id!, revisionId };
}

/** `projects/{project}`, the parent of schemas. Returns the project. */
export function parseProjectParent(value: unknown, field = 'parent'): string {
  const m = typeof value === 'string' ? /^projects\/([^/]+)$/.exec(value) : null;
  if (!m) throw new InvalidArgumentError(field, `expected projects/{project}, got ${JSON.stringify(value) ?? String(value)}`);
  checkProject(m[1]!, field);
  return m[1]!;
}

export function checkSchemaId(id: string, field: string): void {
  if (!ID.test(id) || id.startsWith('goog')) {
    throw new InvalidArgumentError(
      field,
      `invalid schema id ${JSON.stringify(id)}: 3-255 characters, starting with a letter, of letters, digits and - _ . ~ + %, not starting with "goog"`,
    );
  }
}
