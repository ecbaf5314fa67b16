import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import '../../examples/jsonl-file-connector/src/index.js';
import { registeredConnectors } from '../../src/connector/registry.js';
import { statusOf } from '../../src/job/metrics.js';
import { tempDir } from '../helpers/temp-dir.js';
import { openExport } from '../helpers/export.js';
import { waitFor } from '../helpers/wait-for.js';

let dir: ReturnType<typeof tempDir>;
let env: Awaited<ReturnType<typeof openExport>>;
beforeEach(async () => {
  dir = tempDir();
  env = await openExport(dir.path);
  await env.core.createTopic('events');
});
afterEach(async () => {
  await env.close();
  dir.remove();
});

describe('a third-party connector', () => {
  it('registers by name beside the built-ins and exports through exportConfig', async () => {
    expect(registeredConnectors()).toEqual(expect.arrayContaining(['duckdb-table', 'jsonl-file']));
    const path = join(dir.path, 'out.jsonl');
    await env.core.createSubscription('to-file', {
      topic: 'events',
      enableMessageOrdering: true,
      exportConfig: { connector: 'jsonl-file', path },
    });
    await env.exports.sync();
    await env.core.publish(
      'events',
      Array.from({ length: 30 }, (_, i) => ({ data: `m${i}`, orderingKey: `k${i % 3}` })),
    );
    await waitFor('export', () => env.core.metrics('to-file').backlogMessages === 0);
    const lines = readFileSync(path, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { key: string; sequence: number });
    expect(lines).toHaveLength(30);
    for (const k of ['k0', 'k1', 'k2']) {
      expect(lines.filter((l) => l.key === k).map((l) => l.sequence)).toEqual(Array.from({ length: 10 }, (_, i) => i + 1));
    }
  });

  it('a bad connector config is refused when the subscription is created or updated, whatever API makes the change', async () => {
    await expect(env.core.createSubscription('bad-conn', { topic: 'events', exportConfig: { connector: 'jsonl-file' } })).rejects.toThrow(
      'exportConfig.path: is required',
    );
    await expect(env.core.createSubscription('no-conn', { topic: 'events', exportConfig: { connector: 'nope' } })).rejects.toThrow(
      'exportConfig.connector: no connector named "nope" (registered: ',
    );
    await expect(env.core.createSubscription('no-conn', { topic: 'events', exportConfig: { connector: 'nope' } })).rejects.toThrow(
      "a connector of another package is there once the job file's plugins: lists it",
    );
    expect(env.core.hasSubscription('bad-conn') || env.core.hasSubscription('no-conn')).toBe(false);
    await env.core.createSubscription('plain', { topic: 'events' });
    await expect(env.core.updateSubscription('plain', { exportConfig: { connector: 'jsonl-file' } })).rejects.toThrow(
      'exportConfig.path: is required',
    );
  });

  it('follows the core: created, changed and deleted export subscriptions start, restart and stop their runners', async () => {
    const first = join(dir.path, 'first.jsonl');
    const second = join(dir.path, 'second.jsonl');
    await env.core.createSubscription('follow', { topic: 'events', exportConfig: { connector: 'jsonl-file', path: first } });
    await waitFor('runner', () => env.exports.runner('follow') !== undefined);
    await env.core.publish('events', [{ data: 'one' }]);
    await waitFor('first file', () => env.core.metrics('follow').backlogMessages === 0 && existsSync(first));
    const before = env.exports.runner('follow');
    await env.core.updateSubscription('follow', { exportConfig: { connector: 'jsonl-file', path: second } });
    await waitFor('restarted runner', () => ![before, undefined].includes(env.exports.runner('follow')));
    await env.core.publish('events', [{ data: 'two' }]);
    await waitFor('second file', () => env.core.metrics('follow').backlogMessages === 0 && existsSync(second));
    expect(readFileSync(second, 'utf8')).toContain('two');
    await env.core.deleteSubscription('follow');
    await waitFor('stopped runner', () => env.exports.runner('follow') === undefined);
  });

  it("an export section changed at runtime keeps counting its totals on from the first runner's", async () => {
    await env.core.createSubscription('totals', {
      topic: 'events',
      exportConfig: { connector: 'jsonl-file', path: join(dir.path, 'first.jsonl') },
    });
    await waitFor('runner', () => env.exports.runner('totals') !== undefined);
    await env.core.publish('events', [{ data: 'one' }, { data: 'two' }]);
    await waitFor('first export', () => env.core.metrics('totals').backlogMessages === 0);
    const before = env.exports.runner('totals');
    await env.core.updateSubscription('totals', { exportConfig: { connector: 'jsonl-file', path: join(dir.path, 'second.jsonl') } });
    await waitFor('restarted runner', () => ![before, undefined].includes(env.exports.runner('totals')));
    await env.core.publish('events', [{ data: 'three' }]);
    await waitFor('second export', () => env.core.metrics('totals').backlogMessages === 0);
    const row = statusOf(env.core, env.exports).find((s) => s.subscription === 'projects/p/subscriptions/totals');
    expect(row).toMatchObject({ exported: 3, exportRefused: 0, exportCounters: { linesWritten: 3 } });
  });
});
