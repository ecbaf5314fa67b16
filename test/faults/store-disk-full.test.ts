import { execFile, execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { orderlyBin } from '../helpers/cli.js';
import { tempDir } from '../helpers/temp-dir.js';
import { startServe, type ServeProcess } from '../helpers/serve-process.js';

/**
 * The store's disk fills up: a publish answered HTTP 500 INTERNAL ("Orderly internal error", SQLite's
 * "database or disk is full" logged with a stack as a defect of Orderly). Now it is RESOURCE_EXHAUSTED
 * (429) naming the store (and so is the store's own write, such as creating a topic, which answered 500
 * too), the server keeps serving, and once space is freed publishes succeed again; what
 * was acknowledged as published is there exactly once, nothing of a refused publish is.
 *
 * The server logs the refusals, one line per 30 s however many (clients retry them).
 *
 * A real full file system: an 8 MiB tmpfs, which needs mount(2) (root); skipped where it cannot be mounted.
 */
function mountTmpfs(path: string, size: string): boolean {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', path], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

const probe = tempDir('orderly-mount-probe-');
const canMount = mountTmpfs(probe.path, '1m');
if (canMount) execFileSync('umount', [probe.path]);
probe.remove();

let dir: ReturnType<typeof tempDir>;
let mounted = false;
let server: ServeProcess | undefined;
beforeEach(() => {
  dir = tempDir();
  mounted = mountTmpfs(dir.path, '8m');
});
afterEach(async () => {
  await server?.stop();
  server = undefined;
  if (mounted) execFileSync('umount', [dir.path]);
  dir.remove();
});

const P = 'projects/disk-full';

async function rest(method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(`http://${server!.host}/v1/${P}/${path}`, {
    method,
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}

/** 50 messages of ~20 KB on one key, each carrying its number. */
const batch = (n: number) => ({
  messages: Array.from({ length: 50 }, (_, i) => ({
    data: Buffer.from(`${n * 50 + i}`.padEnd(20_000, '.')).toString('base64'),
    orderingKey: `k${n % 3}`,
    attributes: { n: String(n * 50 + i) },
  })),
});

describe.skipIf(!canMount)('the store on a full disk', () => {
  it('a publish is RESOURCE_EXHAUSTED naming the store, the server keeps serving, and publishes succeed again once space is freed', async () => {
    const data = join(dir.path, 'data');
    mkdirSync(data);
    server = await startServe(['--data-dir', data]);
    expect((await rest('PUT', 'topics/orders')).status).toBe(200);
    expect((await rest('PUT', 'subscriptions/orders-sub', { topic: `${P}/topics/orders`, enableMessageOrdering: true })).status).toBe(200);
    // Room for a few batches only.
    const filler = join(dir.path, 'filler');
    writeFileSync(filler, Buffer.alloc(5 * 1024 * 1024));

    const published: number[] = [];
    let refused: { status: number; json: any } | undefined;
    for (let n = 0; n < 100 && !refused; n++) {
      const answer = await rest('POST', 'topics/orders:publish', batch(n));
      if (answer.status === 200) published.push(n);
      else refused = answer;
    }
    expect(refused).toBeDefined();
    expect(refused!.status).toBe(429);
    expect(refused!.json.error.status).toBe('RESOURCE_EXHAUSTED');
    expect(refused!.json.error.message).toContain(join(data, 'orderly.sqlite'));
    expect(refused!.json.error.message).toContain('disk is full');
    expect(server.alive()).toBe(true);
    expect(server.output()).not.toContain('internal error');

    // The store's own writes (topics here): the same typed refusal, nothing half made. A small write can
    // still fit where the refused publish's pages were (SQLite reuses its WAL's tail), so topics are
    // created until the disk refuses one.
    let topicRefused: { name: string; answer: { status: number; json: any } } | undefined;
    for (let i = 0; i < 300 && !topicRefused; i++) {
      const name = `refunds-${i}`;
      const answer = await rest('PUT', `topics/${name}`);
      if (answer.status !== 200) topicRefused = { name, answer };
    }
    expect(topicRefused).toBeDefined();
    expect(topicRefused!.answer.status).toBe(429);
    expect(topicRefused!.answer.json.error.status).toBe('RESOURCE_EXHAUSTED');
    expect(topicRefused!.answer.json.error.message).toContain(join(data, 'orderly.sqlite'));
    expect((await rest('GET', `topics/${topicRefused!.name}`)).status).toBe(404);
    // The server's log says so (it said nothing while clients were refused), once for both refusals.
    const storeFull = server
      .output()
      .split('\n')
      .filter((line) => line.includes('the store cannot take writes: its disk is full'));
    expect(storeFull).toHaveLength(1);
    expect(storeFull[0]).toContain(join(data, 'orderly.sqlite'));

    rmSync(filler);
    expect((await rest('PUT', `topics/${topicRefused!.name}`)).status).toBe(200);
    const after = 1000;
    expect((await rest('POST', 'topics/orders:publish', batch(after))).status).toBe(200);
    published.push(after);

    // Every published message once, per key in order; nothing of the refused publishes.
    const received: { key: string; n: number }[] = [];
    for (let empty = 0; empty < 3;) {
      const { json } = await rest('POST', 'subscriptions/orders-sub:pull', { maxMessages: 1000, returnImmediately: true });
      const messages = (json.receivedMessages ?? []) as { ackId: string; message: { orderingKey: string; attributes: { n: string } } }[];
      if (!messages.length) {
        empty++;
        continue;
      }
      for (const m of messages) received.push({ key: m.message.orderingKey, n: Number(m.message.attributes.n) });
      expect((await rest('POST', 'subscriptions/orders-sub:acknowledge', { ackIds: messages.map((m) => m.ackId) })).status).toBe(200);
    }
    const expected = published.flatMap((n) => Array.from({ length: 50 }, (_, i) => n * 50 + i));
    expect(received.map((r) => r.n).sort((a, b) => a - b)).toEqual(expected);
    for (const key of ['k0', 'k1', 'k2']) {
      const ns = received.filter((r) => r.key === key).map((r) => r.n);
      expect(ns).toEqual([...ns].sort((a, b) => a - b));
    }
  }, 30_000);

  it('orderly serve on a disk with no room left for its lock file exits 1 naming the file, leaving no half-written file', async () => {
    const data = join(dir.path, 'data');
    mkdirSync(data);
    // Fill the file system to the last block.
    try {
      writeFileSync(join(dir.path, 'filler'), Buffer.alloc(16 * 1024 * 1024));
    } catch {
      // ENOSPC: what fitted is written
    }
    const result = await new Promise<{ code: number | null; stderr: string }>((resolve) =>
      execFile(
        process.execPath,
        [orderlyBin, 'serve', '--port', '0', '--data-dir', data],
        { encoding: 'utf8', timeout: 20_000 },
        (e, _out, stderr) => resolve({ code: e ? ((e as { code?: number }).code ?? null) : 0, stderr }),
      ),
    );
    expect(result.code).toBe(1);
    // The OS lock's file is the first the lock writes (job-lock.ts): its failure names it.
    expect(result.stderr).toContain(`cannot lock the data directory ${data} (${join(data, 'orderly.lock.db')}): database or disk is full`);
    expect(readdirSync(data)).toEqual([]);
  }, 30_000);
});
