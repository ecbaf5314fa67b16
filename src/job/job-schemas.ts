import { readFileSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { z } from 'zod';
import { InvalidArgumentError } from '../core/errors.js';
import { compileSchema, MAX_DEFINITION_BYTES } from '../schema/schema-definition.js';
import { parseSchemaName } from '../schema/schema-name.js';

/**
 * The job file's `schemas` (SchemaService schemas) and its topics' `schemaSettings`, so that a job file
 * alone can bring up a topic with a schema and the exports that write with it (`useTopicSchema`); before,
 * only the API could, and a job file whose exports asked for a topic's schema could not start in one go.
 */

/** A `schemas` entry: a schema's id, type and definition, given inline or as a file beside the job file. */
export const jobSchemaEntry = z.strictObject({
  name: z.string(),
  type: z.enum(['AVRO', 'PROTOCOL_BUFFER']),
  definition: z.string().optional(),
  /** Relative to the job file's folder. */
  definitionFile: z.string().optional(),
});

/** A topic's `schemaSettings`, as Pub/Sub's; `schema` names a `schemas` entry (its id or full name). */
export const jobTopicSchemaSettings = z.strictObject({
  schema: z.string(),
  encoding: z.enum(['JSON', 'BINARY']),
  firstRevisionId: z.string().optional(),
  lastRevisionId: z.string().optional(),
});

/** A `schemas` entry as the job holds it once loaded: its definition read. */
export interface JobSchema {
  name: string;
  type: 'AVRO' | 'PROTOCOL_BUFFER';
  definition: string;
}

/** The full name a schema reference of the file stands for: a bare id is in the job's project. */
export function jobSchemaName(ref: string, projectId: string, field: string): string {
  return parseSchemaName(ref.includes('/') ? ref : `projects/${projectId}/schemas/${ref}`, field).name;
}

/**
 * Checks the `schemas` entries (a name once, exactly one of definition and definitionFile, the definition
 * compiled as CreateSchema compiles it) and reads their definition files. Returns each entry's definition
 * (undefined where it has a problem) and the full names the file declares.
 */
export function checkJobSchemas(
  entries: unknown[],
  base: string,
  projectId: string,
  problems: string[],
): { definitions: (string | undefined)[]; names: Set<string> } {
  const names = new Set<string>();
  const definitions = entries.map((raw, i) => {
    const at = `schemas[${i}]`;
    const parsed = jobSchemaEntry.safeParse(raw);
    // Its shape's problems are the job schema's to report.
    if (!parsed.success) return undefined;
    const entry = parsed.data;
    try {
      const name = jobSchemaName(entry.name, projectId, 'name');
      if (names.has(name)) throw new InvalidArgumentError('name', `${name} is listed twice in schemas`);
      names.add(name);
      const definition = definitionOf(entry, base);
      compileSchema(entry.type, definition);
      return definition;
    } catch (e) {
      if (!(e instanceof InvalidArgumentError)) throw e;
      problems.push(`${at}.${e.message.replace(/^schema\./, '')}`);
      return undefined;
    }
  });
  return { definitions, names };
}

function definitionOf(entry: z.infer<typeof jobSchemaEntry>, base: string): string {
  if ((entry.definition === undefined) === (entry.definitionFile === undefined))
    throw new InvalidArgumentError(
      'definition',
      'give exactly one of definition (the text) and definitionFile (a file beside the job file)',
    );
  if (entry.definition !== undefined) return entry.definition;
  const path = resolve(base, entry.definitionFile!);
  try {
    // The definition's own cap, before reading: a job file cannot point its load at a huge file.
    const { size } = statSync(path);
    if (size > MAX_DEFINITION_BYTES)
      throw new InvalidArgumentError('definitionFile', `${path}: ${size} bytes; a definition is at most ${MAX_DEFINITION_BYTES} bytes`);
    return readFileSync(path, 'utf8');
  } catch (e) {
    if (e instanceof InvalidArgumentError) throw e;
    throw new InvalidArgumentError('definitionFile', `cannot read ${path}: ${(e as Error).message}`);
  }
}
