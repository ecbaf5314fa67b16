import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, expect, it } from 'vitest';
import { tempDir } from '../helpers/temp-dir.js';

const entry = fileURLToPath(new URL('../../dist/src/index.js', import.meta.url));
let dir: ReturnType<typeof tempDir>;
afterEach(() => dir.remove());

/**
 * Runs a script using the built package, as a user's program would, to its end: `body` runs with `core`
 * open on a fresh store, with topic `events` and its subscription `events-sub`.
 */
function runScript(body: string): Promise<{ code: number | null; out: string }> {
  const file = join(dir.path, 'script.mjs');
  writeFileSync(
    file,
    `import { PubSubCore, SqliteStore } from ${JSON.stringify(entry)};
    const core = await PubSubCore.open({ store: SqliteStore.open(${JSON.stringify(join(dir.path, 'data'))}) });
    await core.createTopic('events');
    await core.createSubscription('events-sub', { topic: 'events' });
    ${body}`,
  );
  return new Promise((resolve) => {
    const child = execFile(process.execPath, [file], { timeout: 30_000 }, (_e, stdout, stderr) =>
      resolve({ code: child.exitCode, out: stdout + stderr }),
    );
  });
}

it('an open subscriber keeps the process running, as an open StreamingPull stream does; closing it lets the process end', async () => {
  dir = tempDir();
  // The message is published by an unref'd timer: only the subscriber can keep the process alive until it fires.
  const { code, out } = await runScript(`
    const subscriber = core.subscribe('events-sub', async (m) => {
      console.log('received ' + m.message.data.toString());
      await subscriber.close();
      await core.close();
    });
    setTimeout(() => void core.publish('events', [{ data: 'late' }]), 200).unref();
  `);
  expect(out).toContain('received late');
  expect(code).toBe(0);
});

it('a core closed with a subscriber still open lets the process end', async () => {
  dir = tempDir();
  const { code, out } = await runScript(`
    core.subscribe('events-sub', () => undefined);
    await core.close();
    console.log('closed');
  `);
  expect(out).toContain('closed');
  expect(code).toBe(0);
});
