/**
 * An Orderly export connector from outside Orderly: `exportConfig: { connector: jsonl-file, path }` appends
 * the subscription's messages to a JSON-lines file. Importing this module registers it; list it in a job
 * file's `plugins:`. It declares a settings section (`jsonlFile: { directory }`, where relative paths go),
 * a Prometheus counter, an order audit (`orderly audit`) and a query view (`orderly query`).
 */
import { isAbsolute, join } from 'node:path';
import {
  InvalidArgumentError,
  quoteString,
  registerConnector,
  type AuditResult,
  type ConnectorFactory,
  type ExportTarget,
  type SettingsSection,
} from 'orderly/connector';
import { LINE_COLUMNS, readLines } from './jsonl-file.js';
import { JsonlFileConnector } from './jsonl-file-connector.js';

/** A subscription's `exportConfig` (besides `connector`). */
export interface JsonlFileConfig {
  /** The file to append to; relative to the `jsonlFile.directory` setting, else to the job's data directory. */
  path: string;
}

/** The job file's `jsonlFile:` section. */
export interface JsonlFileSettings {
  /** Where relative `path`s go (relative to the job file). */
  directory: string;
}

const settings: SettingsSection<JsonlFileSettings> = {
  key: 'jsonlFile',
  schema(raw) {
    const { directory, ...rest } = (raw ?? {}) as Record<string, unknown>;
    const unknown = Object.keys(rest)[0];
    if (unknown !== undefined) throw new InvalidArgumentError(unknown, 'unknown key (known: directory)');
    if (typeof directory !== 'string' || !directory) throw new InvalidArgumentError('directory', 'must be a folder path');
    return { directory };
  },
  resolvePaths: (s, resolvePath) => ({ directory: resolvePath(s.directory) }),
};

/** Where a subscription's file is. */
function fileOf({ config, settings }: Pick<ExportTarget<JsonlFileConfig>, 'config' | 'settings'>): string {
  if (isAbsolute(config.path)) return config.path;
  const section = settings.jsonlFile as JsonlFileSettings | undefined;
  return join(section?.directory ?? settings.dataDir, config.path);
}

export const jsonlFileConnector: ConnectorFactory<JsonlFileConfig, JsonlFileSettings> = {
  name: 'jsonl-file',
  parseConfig(raw) {
    const path = (raw as { path?: unknown } | undefined)?.path;
    if (typeof path !== 'string' || !path) throw new InvalidArgumentError('exportConfig.path', 'is required: the file to append to');
    return { path };
  },
  settings,
  counters: { linesWritten: { metric: 'orderly_jsonl_lines_written_total', help: 'Lines appended to JSON-lines files' } },
  create: (config, context) => new JsonlFileConnector(fileOf({ config, settings: context.settings }), context.identity.uid),

  /** Each key's sequences in the file: in order, no gaps, none twice. */
  async audit(target): Promise<AuditResult> {
    const lines = (await readLines(fileOf(target))).filter((l) => l.uid === target.identity.uid);
    const checks = { outOfOrder: [] as string[], duplicates: [] as string[], missing: [] as string[] };
    const last = new Map<string, number>();
    for (const { key, sequence, id } of lines) {
      if (!key) continue;
      const before = last.get(key);
      if (before !== undefined && sequence === before) checks.duplicates.push(`${key}: ${sequence} (${id})`);
      else if (before !== undefined && sequence < before) checks.outOfOrder.push(`${key}: ${sequence} after ${before}`);
      else if (before !== undefined && sequence > before + 1) checks.missing.push(`${key}: ${before + 1}..${sequence - 1}`);
      last.set(key, Math.max(sequence, before ?? 0));
    }
    const check = (label: string, found: string[]) => ({ label, count: found.length, examples: found.slice(0, 5), failing: true });
    return {
      summary: `lines ${lines.length}, keys ${last.size}`,
      checks: [
        check('missing sequences', checks.missing),
        check('duplicates', checks.duplicates),
        check('out of order', checks.outOfOrder),
      ],
      report: { lines: lines.length, keys: last.size, ...checks },
    };
  },

  /** The subscription's lines, as a table. */
  async queryView(target) {
    const file = fileOf(target);
    const lines = await readLines(file);
    const columns = Object.entries(LINE_COLUMNS);
    // No file yet: the same columns, no rows.
    if (!lines.length)
      return { files: [], select: `SELECT ${columns.map(([name, type]) => `NULL::${type} AS ${name}`).join(', ')} WHERE false` };
    const types = `{${columns.map(([name, type]) => `${name}: '${type}'`).join(', ')}}`;
    return {
      files: [file],
      select: `SELECT * FROM read_json([${quoteString(file)}], format = 'newline_delimited', columns = ${types}) WHERE uid = ${quoteString(target.identity.uid)}`,
    };
  },
};

registerConnector(jsonlFileConnector);
