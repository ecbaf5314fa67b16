import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { registeredConnectors } from '../../src/connector/registry.js';
import { loadJob, loadJobWithPlugins } from '../../src/job/job-config.js';
import { resolvePlugin } from '../../src/job/plugins.js';
import { tempDirPerTest } from '../helpers/temp-dir-per-test.js';

// The example connector, from source (vitest maps its `orderly/connector` import to src/).
const plugin = fileURLToPath(new URL('../../examples/jsonl-file-connector/src/index.ts', import.meta.url));

const dir = tempDirPerTest();

const job = (extra: Record<string, unknown>) => {
  const file = join(dir.path, 'job.yaml');
  writeFileSync(
    file,
    stringify({
      topics: [{ name: 'events' }],
      subscriptions: [{ name: 'to-file', topic: 'events', exportConfig: { connector: 'jsonl-file', path: 'out.jsonl' } }],
      ...extra,
    }),
  );
  return file;
};
const problems = async (load: () => unknown): Promise<string[]> => {
  try {
    await load();
  } catch (e) {
    return (e as { problems?: string[] }).problems ?? [(e as Error).message];
  }
  return [];
};

describe('plugins: in the job file', () => {
  it("loadJob does not import them and says so; loadJobWithPlugins does, then validates the plugin's connector and settings section", async () => {
    const file = job({ plugins: [plugin], jsonlFile: { directory: './exports' } });
    expect(await problems(() => loadJob(file))).toEqual(
      expect.arrayContaining([`plugins[0]: "${plugin}" is not loaded (load the job with loadJobWithPlugins, as the orderly command does)`]),
    );
    expect(registeredConnectors()).not.toContain('jsonl-file');
    const loaded = await loadJobWithPlugins(file);
    expect(registeredConnectors()).toContain('jsonl-file');
    // The section's paths are resolved against the job file's folder.
    expect(loaded.sections.jsonlFile).toEqual({ directory: join(dir.path, 'exports') });
    expect(loadJob(file).plugins).toEqual([plugin]);
  });

  it("a problem in the plugin's section is reported with its path, with the others", async () => {
    const file = job({ plugins: [plugin], jsonlFile: { directory: './exports', colour: 'red' }, colour: 'blue' });
    expect(await problems(() => loadJobWithPlugins(file))).toEqual([
      'colour: unknown key (a typo? see docs/configuration.md)',
      'jsonlFile.colour: unknown key (known: directory)',
    ]);
  });

  it("a plugin that registers a built-in's name is the plugin refused, by its index (orderly validate, a fresh process)", async () => {
    const registry = pathToFileURL(fileURLToPath(new URL('../../dist/src/connector/index.js', import.meta.url))).href;
    writeFileSync(
      join(dir.path, 'taken.js'),
      `import { registerConnector } from ${JSON.stringify(registry)};\n` +
        "registerConnector({ name: 'object-storage', parseConfig: () => ({}), create: () => ({}) });\n",
    );
    const file = job({ plugins: ['./taken.js'] });
    const bin = fileURLToPath(new URL('../../bin/orderly.js', import.meta.url));
    const validate = spawnSync(process.execPath, [bin, 'validate', file], { encoding: 'utf8' });
    // It said only: orderly: a different connector is already registered as "object-storage" (exit 1).
    expect(validate.stderr).toContain(
      'plugins[0]: cannot load "./taken.js": a different connector is already registered as "object-storage"',
    );
    expect(validate.status).toBe(2);
  });

  it('a plugin that cannot be found or loaded is named, with the reason', async () => {
    writeFileSync(join(dir.path, 'broken.js'), 'throw new Error("broken on purpose");\n');
    const file = job({ plugins: ['./missing.js', './broken.js', 'no-such-package'] });
    expect(await problems(() => loadJobWithPlugins(file))).toEqual([
      `plugins[0]: no file ${join(dir.path, 'missing.js')} (a plugin path is relative to the job file's folder)`,
      'plugins[1]: cannot load "./broken.js": broken on purpose',
      expect.stringMatching(/^plugins\[2\]: no package "no-such-package" in node_modules from /),
    ]);
  });

  it("a package name is found in node_modules from the job file's folder upwards, by its import export", () => {
    const pkg = join(dir.path, 'node_modules', '@acme', 'connector');
    mkdirSync(join(pkg, 'esm'), { recursive: true });
    writeFileSync(
      join(pkg, 'package.json'),
      JSON.stringify({
        name: '@acme/connector',
        exports: { '.': { types: './index.d.ts', import: './esm/index.js', require: './index.cjs' }, './extra': './extra.js' },
      }),
    );
    const nested = join(dir.path, 'jobs', 'nightly');
    mkdirSync(nested, { recursive: true });
    expect(resolvePlugin('@acme/connector', nested)).toBe(pathToFileURL(join(pkg, 'esm', 'index.js')).href);
    expect(resolvePlugin('@acme/connector/extra', nested)).toBe(pathToFileURL(join(pkg, 'extra.js')).href);
    expect(() => resolvePlugin('@acme/connector/hidden', nested)).toThrow('package "@acme/connector" exports no "./hidden" for import');
  });

  it("a connector package's own name is found from inside it, as Node's self-reference does (its jobs and its conformance tests name it so)", () => {
    const pkg = join(dir.path, 'my-connector');
    mkdirSync(join(pkg, 'dist'), { recursive: true });
    writeFileSync(join(pkg, 'package.json'), JSON.stringify({ name: 'my-connector', type: 'module', exports: './dist/index.js' }));
    const jobs = join(pkg, 'jobs');
    mkdirSync(jobs, { recursive: true });
    expect(resolvePlugin('my-connector', jobs)).toBe(pathToFileURL(join(pkg, 'dist', 'index.js')).href);
    // Only with exports (as in Node), and only the package the folder is in.
    writeFileSync(join(pkg, 'package.json'), JSON.stringify({ name: 'my-connector', main: './dist/index.js' }));
    expect(() => resolvePlugin('my-connector', jobs)).toThrow(/no package "my-connector"/);
  });
});
