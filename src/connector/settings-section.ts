import type { Logger } from '../log.js';

/**
 * The Standard Schema interface (https://standardschema.dev), which zod, valibot and arktype schemas
 * implement: a section's schema can come from any of them (synchronous validation only).
 * @typeParam Output the validated value
 */
export interface StandardSchema<Output> {
  /** The Standard Schema properties; `validate` must answer synchronously here. */
  readonly '~standard': {
    readonly version: 1;
    readonly vendor: string;
    readonly validate: (value: unknown) => StandardResult<Output> | Promise<StandardResult<Output>>;
  };
}

/** A Standard Schema validation result: the value, or the issues. */
export type StandardResult<Output> =
  { readonly value: Output; readonly issues?: undefined } | { readonly issues: readonly StandardIssue[] };

/** One problem a Standard Schema found: what, and where in the section. */
export interface StandardIssue {
  /** What is wrong. */
  readonly message: string;
  /** Where, inside the section (keys and array indexes). */
  readonly path?: readonly (PropertyKey | { readonly key: PropertyKey })[];
}

/**
 * A connector's own top-level section of the job file (`duckdb:`, `objectStorage:`), declared by its
 * factory (`ConnectorFactory.settings`). Orderly validates it with the rest of the job file (every
 * problem, each with its path), opens it when a job starts, and hands what `open` provides to every
 * connector in `ConnectorContext.settings`.
 * @typeParam Settings the section's validated value
 */
export interface SettingsSection<Settings = unknown> {
  /** The job file's key, e.g. `objectStorage`; not one of the job's own keys (topics, subscriptions, ...). */
  key: string;
  /**
   * Validates the section: a Standard Schema (e.g. a zod schema), or a function that returns the settings
   * or throws an InvalidArgumentError naming the field (relative to the section).
   */
  schema: StandardSchema<Settings> | ((raw: unknown) => Settings);
  /** Makes relative file paths in the section absolute; `resolvePath` resolves against the job file's folder. */
  resolvePaths?(settings: Settings, resolvePath: (path: string) => string): Settings;
  /**
   * Makes ready what the section describes while a job runs (starts a local server, runs setup
   * statements) and returns what connectors are given. Without `open`, connectors get the validated
   * section under its key.
   */
  open?(settings: Settings, context: SectionContext): Promise<OpenSection>;
}

/** What `SettingsSection.open` is told about the job. */
export interface SectionContext {
  /** The job's data directory (absolute). */
  dataDir: string;
  /**
   * Set for read-only commands (`orderly query` without --write, `orderly audit`): change nothing and create nothing (run
   * no setup statements, open no database file for writing, make no folder); provide the same settings.
   * For a job that never ran, `dataDir` is then a temporary directory, removed when the command ends.
   */
  readOnly: boolean;
  /** The job's logger. */
  logger: Logger;
}

/** A settings section, opened. */
export interface OpenSection {
  /** Added to every connector's `ConnectorContext.settings`; keys must not clash with another section's. */
  settings: Record<string, unknown>;
  /** A DuckDB database file that `orderly query` opens as its main database (one section per job at most). */
  queryDatabase?: string;
  /** Called when the job stops (after every export has stopped). */
  close?(): Promise<void> | void;
}
