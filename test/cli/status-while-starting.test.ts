import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { orderly } from '../helpers/cli.js';
import { tempDir } from '../helpers/temp-dir.js';
import { OrderlyRunProcess } from '../faults/orderly-run-process.js';

const cleanups: (() => void | Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/**
 * A plugin whose settings section holds the job's start until the test writes `go` in the data directory:
 * a start that takes as long as opening a store and exports at a 1M-message backlog (seconds), on demand.
 */
function holdingPlugin(dir: string): string {
  const registry = pathToFileURL(fileURLToPath(new URL('../../dist/src/connector/index.js', import.meta.url))).href;
  const file = join(dir, 'hold-start.js');
  writeFileSync(
    file,
    [
      "import { existsSync, writeFileSync } from 'node:fs';",
      "import { join } from 'node:path';",
      `import { registerConnector } from ${JSON.stringify(registry)};`,
      'registerConnector({',
      "  name: 'hold-start', parseConfig: () => ({}), create: () => ({}),",
      "  settings: { key: 'holdStart', schema: (raw) => raw, async open(_s, { dataDir }) {",
      "    writeFileSync(join(dataDir, 'held'), '');",
      "    while (!existsSync(join(dataDir, 'go'))) await new Promise((r) => setTimeout(r, 20));",
      '    return { settings: {} };',
      '  } },',
      '});',
    ].join('\n'),
  );
  return file;
}

describe('orderly status and publish while the job is starting', () => {
  it('say the job is starting, not that its file lacks the metrics or endpoint section it has; answer once it runs', async () => {
    const dir = tempDir('orderly-status-starting-');
    cleanups.push(() => dir.remove());
    const job = join(dir.path, 'job.yaml');
    writeFileSync(
      job,
      [
        'projectId: status-starting',
        'dataDir: ./data',
        `plugins: [${JSON.stringify(holdingPlugin(dir.path))}]`,
        'holdStart: {}',
        'metrics: { port: 0 }',
        'endpoint: { port: 0 }',
        'topics: [{ name: orders }]',
        'subscriptions: [{ name: orders-sub, topic: orders }]',
      ].join('\n'),
    );
    const data = join(dir.path, 'data');
    const run = new OrderlyRunProcess(job);
    cleanups.push(() => run.kill('SIGKILL'));
    await vi.waitFor(() => expect(existsSync(join(data, 'held'))).toBe(true), { timeout: 60_000, interval: 50 });

    const status = await orderly('status', job);
    // Before: "... serves no status: give its job file a metrics section (e.g. metrics: { port: 0 }) and restart it".
    expect(status.stderr).toMatch(/\(pid \d+\) is still starting/);
    expect(status.stderr).not.toMatch(/metrics section/);
    expect(status.code).not.toBe(0);
    const lines = join(dir.path, 'one.jsonl');
    writeFileSync(lines, '{"id":1}\n');
    const publish = await orderly('publish', job, '--topic', 'orders', '--file', lines);
    // Before: "the job is running (pid N) without a Pub/Sub endpoint: add endpoint: to the job file".
    expect(publish.stderr).toMatch(/is still starting/);
    expect(publish.stderr).not.toMatch(/add endpoint/);
    expect(publish.code).not.toBe(0);

    writeFileSync(join(data, 'go'), '');
    await run.ready;
    const running = await orderly('status', job, '--json');
    expect(running.code, running.stderr).toBe(0);
    expect(JSON.parse(running.stdout)).toEqual([
      expect.objectContaining({ subscription: 'projects/status-starting/subscriptions/orders-sub' }),
    ]);
    expect((await orderly('publish', job, '--topic', 'orders', '--file', lines)).stdout).toMatch(/published 1, refused 0/);
    run.kill('SIGTERM');
    expect(await run.exited, run.output()).toEqual({ code: 0, signal: null });
  });
});
