import { execFile, spawn, type StdioOptions } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parse, stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { orderly, orderlyBin } from '../helpers/cli.js';
import { PubSubCore } from '../../src/core/pubsub-core.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { closedPort } from '../helpers/closed-port.js';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait-for.js';

const exec = promisify(execFile);

/** `orderly publish --json` of a JSON-lines file to the topic `events`, each line keyed by its `user` field. */
function publishUsers(job: string, file: string, ...options: string[]): Promise<{ stdout: string; stderr: string; code: number }> {
  return orderly('publish', job, '--topic', 'events', '--file', file, '--ordering-key-field', 'user', ...options, '--json');
}

/** `orderly publish job --topic events --json` reading a pipe the test writes; what it printed so far. */
function publishFromPipe(job: string) {
  const child = spawn(process.execPath, [orderlyBin, 'publish', job, '--topic', 'events', '--json'], { stdio: ['pipe', 'pipe', 'pipe'] });
  const printed = { stdout: '', stderr: '' };
  child.stdout.on('data', (chunk: Buffer) => (printed.stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (printed.stderr += chunk.toString()));
  child.stdin.on('error', () => {}); // a command that ended early: its exit says why
  return { child, printed };
}

/**
 * `orderly run` of a job with one topic and one pull subscription in a new directory, logging at info:
 * nothing but its signal handlers keeps it running.
 */
function runPullOnlyJob(stdio: StdioOptions) {
  const dir = tempDir();
  const job = join(dir.path, 'job.yaml');
  writeFileSync(job, stringify({ dataDir: './data', topics: [{ name: 'events' }], subscriptions: [{ name: 'sub', topic: 'events' }] }));
  const child = spawn(process.execPath, [orderlyBin, 'run', job], { stdio, env: { ...process.env, ORDERLY_LOG_LEVEL: 'info' } });
  return { dir, job, child };
}
describe('orderly CLI', () => {
  it('--help lists every command, and each command has help with an example', async () => {
    const { stdout } = await orderly('--help');
    for (const c of ['validate', 'run', 'publish', 'status', 'audit', 'query', 'demo']) expect(stdout).toContain(c);
    expect((await orderly('publish', '--help')).stdout).toContain('Example:');
    const version = await orderly('--version');
    const pkg = JSON.parse(readFileSync(fileURLToPath(new URL('../../package.json', import.meta.url)), 'utf8')) as { version: string };
    expect([version.code, version.stdout.trim()]).toEqual([0, pkg.version]);
  });

  it('validate: every problem with its path, exit code 2; --json for a valid file and an invalid one', async () => {
    const dir = tempDir();
    const bad = join(dir.path, 'bad.yaml');
    writeFileSync(
      bad,
      stringify({
        topics: [{ name: 'events' }],
        subscriptions: [
          { name: 'a-sub', topic: 'events', ackDeadlineSeconds: 5 },
          { name: 'b-sub', topic: 'nope' },
        ],
      }),
    );
    const r = await orderly('validate', bad);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('2 problems');
    expect(r.stderr).toContain('subscriptions[0].ackDeadlineSeconds: must be an integer between 10 and 600, got 5');
    expect(r.stderr).toContain('subscriptions[1].topic: no topic "nope" in topics');
    const asJson = await orderly('validate', bad, '--json');
    expect(asJson.code).toBe(2);
    expect(JSON.parse(asJson.stdout)).toEqual({
      valid: false,
      problems: [
        'subscriptions[0].ackDeadlineSeconds: must be an integer between 10 and 600, got 5',
        'subscriptions[1].topic: no topic "nope" in topics',
      ],
    });
    const ok = await orderly('validate', 'fixtures/demo/job.yaml', '--json');
    expect(JSON.parse(ok.stdout)).toEqual({ valid: true, topics: 2, subscriptions: 2, schemas: 0 });
    expect((await orderly('validate', 'fixtures/demo/job.yaml')).stdout).toBe(
      'fixtures/demo/job.yaml: valid (2 topics, 2 subscriptions, 0 schemas)\n',
    );
    // A fleet worker's job: it said "valid (0 topics, 0 subscriptions)", as if it would do nothing.
    const fleet = join(dir.path, 'fleet.yaml');
    writeFileSync(
      fleet,
      stringify({
        objectStorage: { endpoint: 'http://127.0.0.1:9' },
        remote: { endpoint: '127.0.0.1:9', exports: [{ subscription: 'orders-export', cloudStorageConfig: { bucket: 'exports' } }] },
      }),
    );
    expect((await orderly('validate', fleet)).stdout).toBe(`${fleet}: valid (1 remote export)\n`);
    expect(JSON.parse((await orderly('validate', fleet, '--json')).stdout)).toEqual({ valid: true, remoteExports: 1 });
    dir.remove();
  });

  it('demo (the README quick start) exports to DuckDB and Parquet and audits the order', async () => {
    const { stdout, code } = await orderly('demo');
    expect(code).toBe(0);
    expect(stdout).toContain('published 4173 order changes (refused 0)');
    expect(stdout).toContain('orders-to-duckdb: state ACTIVE, exported 4173, backlog 0');
    expect(stdout).toContain('orders-to-parquet: state ACTIVE, exported 4173, backlog 0');
    expect(stdout).toMatch(/objects \d+, records 4173, keys 1200 \(checked record by record\)/);
    expect(stdout).toContain('missing sequences: 0');
    expect(stdout).toContain('duplicates: 0');
  });

  it("status of a running job: each subscription's resident payload bytes, within memory.payloadBytes", async () => {
    const dir = tempDir();
    const job = join(dir.path, 'job.yaml');
    const limit = 256 * 1024;
    writeFileSync(
      job,
      stringify({
        projectId: 'cli-memory',
        dataDir: './data',
        memory: { payloadBytes: '256KiB' },
        metrics: { port: 0 },
        topics: [{ name: 'events' }],
        subscriptions: [{ name: 'backlog', topic: 'events', enableMessageOrdering: true }],
      }),
    );
    // 300 × ~2 KB: more than the payload budget, so the window holds only part of it in memory.
    const lines = Array.from({ length: 300 }, (_, i) => JSON.stringify({ id: i, user: `u${i % 7}`, pad: 'x'.repeat(2000) }));
    writeFileSync(join(dir.path, 'events.jsonl'), lines.join('\n') + '\n');
    const pub = await publishUsers(job, join(dir.path, 'events.jsonl'));
    expect(JSON.parse(pub.stdout)).toEqual({ published: 300, refused: [] });
    // Nothing runs yet: status reads the store, and says that its states are only as stored.
    const offline = await orderly('status', job);
    expect(offline.stdout).toContain(
      `no job is running on ${join(dir.path, 'data')}: export states are as the job last saw them, and no export runs`,
    );
    type Hot = { backlog: number; hotKeys: { orderingKey: string; backlog: number }[] };
    const [stored] = JSON.parse((await orderly('status', job, '--json')).stdout) as Hot[];
    // Counted in the store, though nothing is in memory: u0-u5 have 43 messages each, u6 42 (ties by key).
    expect(stored).toMatchObject({
      backlog: 300,
      hotKeys: ['u0', 'u1', 'u2', 'u3', 'u4'].map((orderingKey) => ({ orderingKey, backlog: 43 })),
    });

    const child = spawn(process.execPath, [orderlyBin, 'run', job], { stdio: ['ignore', 'ignore', 'pipe'] });
    try {
      const lock = join(dir.path, 'data', 'orderly.lock');
      await waitFor('the metrics endpoint', () => existsSync(lock) && JSON.parse(readFileSync(lock, 'utf8')).metrics !== undefined, 30_000);
      type Row = { backlog: number; residentBytes: number; payloadLimitBytes: number };
      let row: Row | undefined;
      await waitFor(
        'the backlog read into memory',
        async () => {
          [row] = JSON.parse((await orderly('status', job, '--json')).stdout) as Row[];
          return row!.residentBytes > 0;
        },
        30_000,
      );
      expect(row!.payloadLimitBytes).toBe(limit);
      expect(row!.backlog).toBe(300);
      expect(row!.residentBytes).toBeLessThanOrEqual(limit);
      // Whole messages of ~2 KB up to the budget: it is filled, not left mostly empty.
      expect(row!.residentBytes).toBeGreaterThan(limit - 3000);
      const online = (await orderly('status', job)).stdout;
      expect(online).toMatch(/payload memory: 0\.\d MiB of 0\.3 MiB \(memory\.payloadBytes\)/);
      expect(online).not.toContain('no job is running');
    } finally {
      child.kill('SIGTERM');
      await new Promise((resolve) => child.on('exit', resolve));
      dir.remove();
    }
  }, 120_000);

  it('status with no job running: what each snapshot keeps (counted whole) and until when, and a subscription that keeps its acks', async () => {
    const dir = tempDir();
    try {
      const job = join(dir.path, 'job.yaml');
      writeFileSync(
        job,
        stringify({
          projectId: 'cli-snapshots',
          dataDir: './data',
          topics: [{ name: 'events' }],
          subscriptions: [{ name: 'keeper', topic: 'events', retainAckedMessages: true, messageRetentionDuration: '1d' }],
        }),
      );
      writeFileSync(join(dir.path, 'events.jsonl'), ['{"user":"a"}', '{"user":"b"}', ''].join('\n'));
      expect(JSON.parse((await publishUsers(job, join(dir.path, 'events.jsonl'))).stdout)).toEqual({ published: 2, refused: [] });
      const core = await PubSubCore.open({ store: SqliteStore.open(join(dir.path, 'data')), projectId: 'cli-snapshots' });
      const snap = await core.createSnapshot('before', { subscription: 'keeper' });
      await core.close();
      const rows = JSON.parse((await orderly('status', job, '--json')).stdout) as Record<string, unknown>[];
      expect(rows).toEqual([
        expect.objectContaining({ subscription: 'projects/cli-snapshots/subscriptions/keeper', backlog: 2, keepsAckedSeconds: 86400 }),
        {
          snapshot: 'projects/cli-snapshots/snapshots/before',
          topic: 'projects/cli-snapshots/topics/events',
          expireTime: new Date(snap.expireTime).toISOString(),
          heldMessages: 2,
          heldBytes: 24,
          counting: false,
        },
      ]);
      const human = (await orderly('status', job)).stdout;
      expect(human).toContain(
        'projects/cli-snapshots/subscriptions/keeper keeps its acked messages in the store for 86400 s (retainAckedMessages)',
      );
      expect(human).toContain("snapshots (each keeps its topic's messages from its oldest unacked one on in the store until it expires):");
      const line = human.split('\n').find((l) => l.includes("'projects/cli-snapshots/snapshots/before'"));
      expect(line?.split('│').map((cell) => cell.trim())).toEqual([
        '',
        '0',
        "'projects/cli-snapshots/snapshots/before'",
        "'projects/cli-snapshots/topics/events'",
        `'${new Date(snap.expireTime).toISOString()}'`,
        '2',
        '24',
        "'0.0 MiB'",
        '',
      ]);
    } finally {
      dir.remove();
    }
  }, 60_000);

  it('run keeps a job without exports, endpoint or metrics running; status says how to read it', async () => {
    const { dir, job, child } = runPullOnlyJob(['ignore', 'ignore', 'pipe']);
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    try {
      const lock = join(dir.path, 'data', 'orderly.lock');
      // Its lock says it is starting until it has started (status then says so instead).
      const started = () => existsSync(lock) && /^\{(?!.*"starting")/.test(readFileSync(lock, 'utf8'));
      await waitFor('the job to run', started, 30_000);
      const status = await orderly('status', job);
      expect(status.code).toBe(1);
      expect(status.stderr).toContain(`(pid ${child.pid}) serves no status: give its job file a metrics section`);
      // Nothing but the signal handlers to wait on: it used to end right after starting (exit code 13, lock
      // left behind, as soon as its event loop was empty). Still running once status, a process of its own, has come and gone.
      expect(child.exitCode).toBe(null);
    } finally {
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(existsSync(join(dir.path, 'data', 'orderly.lock'))).toBe(false);
      dir.remove();
    }
  }, 120_000);

  it('run stops on SIGHUP with the drain SIGTERM has, then ends by the signal; its lock is removed', async () => {
    const { dir, child } = runPullOnlyJob(['ignore', 'pipe', 'ignore']);
    let log = '';
    child.stdout!.on('data', (chunk: Buffer) => (log += chunk.toString()));
    const exited = new Promise<string | null>((resolve) => child.on('exit', (_code, signal) => resolve(signal)));
    try {
      const lock = join(dir.path, 'data', 'orderly.lock');
      await waitFor('the job to run', () => log.includes('job running'), 30_000);
      // Node's default for SIGHUP ended the process at once: no drain, the lock file left behind.
      child.kill('SIGHUP');
      expect(await exited).toBe('SIGHUP');
      expect(log).toMatch(/"signal":"SIGHUP".*stopping/);
      expect(log).toContain('"msg":"stopped"');
      expect(existsSync(lock)).toBe(false);
    } finally {
      child.kill('SIGKILL');
      dir.remove();
    }
  }, 120_000);

  it('run stops on SIGTERM when its standard output fails (here a full disk: /dev/full)', async () => {
    // As a hung-up terminal (EIO): pino's destination retried its lines at exit forever, so the job stopped
    // but its process never ended.
    const full = openSync('/dev/full', 'w');
    const { dir, child } = runPullOnlyJob(['ignore', full, 'ignore']);
    closeSync(full);
    let code: number | null | undefined;
    child.on('exit', (exitCode) => (code = exitCode));
    try {
      const lock = join(dir.path, 'data', 'orderly.lock');
      // Its log cannot say when it runs: the kernel can, once it catches SIGHUP (SigCgt, bit 1 from 1), which
      // the job does from when it runs (Node itself catches SIGINT and SIGTERM from its start).
      const caught = () => BigInt(`0x${/SigCgt:\s*([0-9a-f]+)/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))![1]}`);
      await waitFor('the job to run', () => existsSync(lock) && (caught() & 1n) === 1n, 30_000);
      child.kill('SIGTERM');
      await waitFor('the job to end', () => code !== undefined, 30_000);
      expect(code).toBe(0);
      expect(existsSync(lock)).toBe(false);
    } finally {
      child.kill('SIGKILL');
      dir.remove();
    }
  }, 120_000);

  it("publish takes --topic as an id or as a full name of any of the job's projects, in process or through a running job; a bad name is one error", async () => {
    const dir = tempDir();
    const job = join(dir.path, 'job.yaml');
    writeFileSync(
      job,
      stringify({
        projectId: 'proj-4',
        dataDir: './data',
        endpoint: { port: 0 },
        topics: [{ name: 'orders' }, { name: 'projects/proj-other/topics/orders' }],
      }),
    );
    const file = join(dir.path, 'm.jsonl');
    writeFileSync(file, '{"n":1}\n{"n":2}\n');
    const publish = async (topic: string) => {
      const r = await orderly('publish', job, '--topic', topic, '--file', file, '--json');
      return { code: r.code, report: r.stdout ? (JSON.parse(r.stdout) as unknown) : undefined, stderr: r.stderr.trim() };
    };
    const published = { code: 0, report: { published: 2, refused: [] }, stderr: '' };
    const badName = {
      code: 2,
      report: { error: { code: 'INVALID_ARGUMENT', message: '--topic: expected a topic name, got projects/proj-4/subscriptions/orders' } },
      stderr: 'orderly: --topic: expected a topic name, got projects/proj-4/subscriptions/orders',
    };
    // The job's store opened here.
    expect(await publish('projects/proj-4/topics/orders')).toEqual(published);
    expect(await publish('projects/proj-4/subscriptions/orders')).toEqual(badName);
    const child = spawn(process.execPath, [orderlyBin, 'run', job], { stdio: ['ignore', 'ignore', 'pipe'] });
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    try {
      const lock = join(dir.path, 'data', 'orderly.lock');
      await waitFor(
        'the endpoint',
        () => existsSync(lock) && JSON.parse(readFileSync(lock, 'utf8') || '{}').endpoint !== undefined,
        30_000,
      );
      // Through the running job's endpoint.
      expect(await publish('projects/proj-4/topics/orders')).toEqual(published);
      expect(await publish('projects/proj-other/topics/orders')).toEqual(published);
      expect(await publish('orders')).toEqual(published);
      expect(await publish('projects/proj-4/subscriptions/orders')).toEqual(badName);
    } finally {
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      dir.remove();
    }
  }, 120_000);

  it("publish --file of a pipe (a FIFO, /dev/stdin, a shell's <(...)) publishes every line of it", async () => {
    const dir = tempDir();
    try {
      const job = join(dir.path, 'job.yaml');
      writeFileSync(job, stringify({ dataDir: './data', topics: [{ name: 'events' }] }));
      // A pipe is read once: a first pass that counted its lines (for the progress bar) took them all. (A
      // shell's pipe: Node's own child stdio is a socket, which /dev/stdin cannot open.)
      const { stdout } = await exec(
        'sh',
        [
          '-c',
          'printf \'{"n":1}\\n{"n":2}\\n{"n":3}\\n\' | "$0" "$1" publish "$2" --topic events --file /dev/stdin --json',
          process.execPath,
          orderlyBin,
          job,
        ],
        { encoding: 'utf8', timeout: 60_000 },
      );
      expect(JSON.parse(stdout)).toEqual({ published: 3, refused: [] });
    } finally {
      dir.remove();
    }
  }, 60_000);

  it('publish refuses a line longer than any message with its number and goes on, without holding it', async () => {
    const dir = tempDir();
    try {
      const job = join(dir.path, 'job.yaml');
      writeFileSync(job, stringify({ dataDir: './data', topics: [{ name: 'events' }] }));
      const { child, printed } = publishFromPipe(job);
      let ended = false;
      const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
      void exited.then(() => (ended = true));
      // A JSON dump on one line, of 600 MiB: before, readline held it whole (700 MiB) and then crashed the
      // command with "RangeError: Invalid string length" and a stack trace, publishing nothing.
      const mib = Buffer.alloc(1024 * 1024, 'x');
      child.stdin.write('{"n":1}\n{"pad":"');
      for (let i = 0; i < 600 && !ended; i++)
        if (!child.stdin.write(mib)) await Promise.race([new Promise((resolve) => child.stdin.once('drain', resolve)), exited]);
      child.stdin.end('"}\n{"n":3}\n');
      expect([await exited, printed.stderr]).toEqual([1, '']);
      expect(JSON.parse(printed.stdout)).toEqual({
        published: 2,
        refused: [
          { line: 2, reason: `the line is ${600 * 1024 * 1024 + 10} bytes: a message's data (the line) may hold at most 10000000` },
        ],
      });
    } finally {
      dir.remove();
    }
  }, 120_000);

  it('publish stopped by SIGINT publishes the lines it read, says up to which line, and exits 130', async () => {
    const dir = tempDir();
    try {
      const job = join(dir.path, 'job.yaml');
      writeFileSync(
        job,
        stringify({ dataDir: './data', topics: [{ name: 'events' }], subscriptions: [{ name: 'events-sub', topic: 'events' }] }),
      );
      const { child, printed } = publishFromPipe(job);
      const exited = new Promise<[number | null, string | null]>((resolve) => child.on('exit', (code, signal) => resolve([code, signal])));
      // More than the pipe holds: the write drains only once the command reads its lines (its signal
      // handling is set up by then). Standard input stays open, as a producer's that goes on writing.
      const lines = Array.from({ length: 10_000 }, (_, n) => JSON.stringify({ n, pad: 'x'.repeat(200) }) + '\n').join('');
      if (!child.stdin.write(lines)) await Promise.race([new Promise((resolve) => child.stdin.once('drain', resolve)), exited]);
      child.kill('SIGINT');
      expect([...(await exited), printed.stderr]).toEqual([130, null, '']);
      const report = JSON.parse(printed.stdout) as { published: number; refused: unknown[]; stopped: { signal: string; lastLine: number } };
      expect(report.stopped.signal).toBe('SIGINT');
      expect(report.stopped.lastLine).toBeGreaterThan(0);
      expect(report).toEqual({ published: report.stopped.lastLine, refused: [], stopped: report.stopped });
      // What it said it published is in the store (it had been killed, with no count and no line to go on from).
      const status = await orderly('status', job, '--json');
      expect((JSON.parse(status.stdout) as { backlog: number }[])[0]!.backlog).toBe(report.published);
    } finally {
      dir.remove();
    }
  }, 60_000);

  it('a flag the job file overrides or does not use is refused (exit 2), not dropped: serve --config with --data-dir, run --worker-id without remote:', async () => {
    const dir = tempDir();
    try {
      const job = join(dir.path, 'job.yaml');
      writeFileSync(job, stringify({ dataDir: './data', topics: [{ name: 'events' }] }));
      // Both had started: serve on the job's dataDir, not the one given; run as the one worker of a job without one.
      const serve = await orderly('serve', '--config', job, '--data-dir', join(dir.path, 'other'), '--port', '0');
      expect([serve.code, serve.stderr.trim()]).toEqual([
        2,
        `orderly: --data-dir: ${job} names the data directory (dataDir); give --config or --data-dir, not both`,
      ]);
      const run = await orderly('run', job, '--worker-id', 'w1');
      expect([run.code, run.stderr.trim()]).toEqual([
        2,
        `orderly: --worker-id: ${job} has no remote: section; a worker id names one worker of a remote export`,
      ]);
      expect(existsSync(join(dir.path, 'data'))).toBe(false);
    } finally {
      dir.remove();
    }
  }, 60_000);

  it('run: a metrics port in use fails the start with the reason, and leaves the data directory free', async () => {
    const dir = tempDir();
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    try {
      const job = join(dir.path, 'job.yaml');
      const port = (taken.address() as AddressInfo).port;
      writeFileSync(
        job,
        stringify({
          dataDir: './data',
          metrics: { port },
          topics: [{ name: 'events' }],
          subscriptions: [{ name: 'sub', topic: 'events' }],
        }),
      );
      const run = await orderly('run', job);
      expect(run.code).toBe(1);
      // Naming the setting: run binds the endpoint's port too.
      expect(run.stderr).toContain(
        `the metrics server cannot listen on 127.0.0.1:${port} (metrics.host, metrics.port): listen EADDRINUSE: address already in use 127.0.0.1:${port}`,
      );
      expect(run.stderr).not.toMatch(/uncaught|defect/i);
      expect(existsSync(join(dir.path, 'data', 'orderly.lock'))).toBe(false);
    } finally {
      taken.close();
      dir.remove();
    }
  });

  it('publish a file, run, scrape metrics, SIGTERM drains; then query, audit and status with --json', async () => {
    const dir = tempDir();
    const job = join(dir.path, 'job.yaml');
    writeFileSync(
      job,
      stringify({
        projectId: 'cli-test',
        dataDir: './data',
        duckdb: {
          path: './data/db.duckdb',
          init: [
            'CREATE TABLE IF NOT EXISTS events(subscription_name VARCHAR, message_id VARCHAR, publish_time TIMESTAMP, data JSON, attributes JSON, ordering_key VARCHAR, sequence BIGINT)',
          ],
        },
        objectStorage: { embedded: true, buckets: ['cli-exports'] },
        metrics: { port: 0 },
        endpoint: { port: 0 },
        topics: [{ name: 'events' }],
        subscriptions: [
          {
            name: 'to-table',
            topic: 'events',
            enableMessageOrdering: true,
            bigqueryConfig: { table: 'cli-test.main.events', writeMetadata: true },
          },
          {
            name: 'to-files',
            topic: 'events',
            enableMessageOrdering: true,
            cloudStorageConfig: {
              bucket: 'cli-exports',
              filenameDatetimeFormat: 'YYYY-MM-DDThh:mm:ssZ',
              parquetConfig: { writeMetadata: true },
            },
          },
        ],
      }),
    );
    const lines = Array.from({ length: 300 }, (_, i) => JSON.stringify({ id: i, user: `u${i % 13}`, tags: { source: 'cli' } }));
    lines.splice(10, 0, '{not json', JSON.stringify({ id: 'no user' }));
    writeFileSync(join(dir.path, 'events.jsonl'), lines.join('\n') + '\n');

    const pub = await publishUsers(job, join(dir.path, 'events.jsonl'), '--attributes-field', 'tags');
    const report = JSON.parse(pub.stdout);
    expect(report.published).toBe(300);
    expect(report.refused.map((r: { line: number }) => r.line)).toEqual([11, 12]);
    expect(report.refused[1].reason).toBe('field "user" (the ordering key) is missing');
    expect(pub.code).toBe(1);

    const child = spawn(process.execPath, [orderlyBin, 'run', job], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ORDERLY_LOG_LEVEL: 'info' },
    });
    let logs = '';
    child.stdout.on('data', (c) => (logs += c));
    const lock = join(dir.path, 'data', 'orderly.lock');
    await waitFor('the metrics endpoint', () => existsSync(lock) && JSON.parse(readFileSync(lock, 'utf8')).metrics !== undefined, 30_000);
    const metricsUrl = JSON.parse(readFileSync(lock, 'utf8')).metrics as string;
    expect(metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    await waitFor(
      'the table export',
      async () => {
        const status = (await (await fetch(`${metricsUrl}/status`)).json()) as {
          subscription: string;
          backlog: number;
          exported: number;
        }[];
        return status.find((s) => s.subscription.endsWith('/to-table'))?.backlog === 0;
      },
      30_000,
    );
    const metrics = await (await fetch(`${metricsUrl}/metrics`)).text();
    expect(metrics).toContain('orderly_backlog_messages{subscription="to-table"} 0');
    expect(metrics).toContain('orderly_exported_total{subscription="to-table"} 300');
    expect(metrics).toContain('orderly_subscription_state{subscription="to-files",state="ACTIVE"} 1');
    expect(metrics).toContain('orderly_rows_appended_total{subscription="to-table"} 300');
    expect(metrics).toContain('orderly_backlog_messages{subscription="to-files"} 300'); // buffered in an open file until shutdown
    expect(metrics).toMatch(/orderly_oldest_unacked_message_age_seconds\{subscription="to-files"\} \d/);
    for (const help of [
      'orderly_published_total',
      'orderly_objects_written_total',
      'orderly_bytes_uploaded_total',
      'orderly_upload_retries_total',
      'orderly_redelivered_total',
      'orderly_dead_lettered_total',
    ]) {
      expect(metrics).toContain(`# HELP ${help}`);
    }
    expect((await orderly('status', job, '--json')).stdout).toContain('"exported": 300');
    // While the job runs, publish goes through its Pub/Sub endpoint.
    const more = Array.from({ length: 20 }, (_, i) => JSON.stringify({ id: 300 + i, user: `u${i % 13}` }));
    writeFileSync(join(dir.path, 'more.jsonl'), more.join('\n') + '\n');
    const live = await publishUsers(job, join(dir.path, 'more.jsonl'));
    expect(JSON.parse(live.stdout)).toEqual({ published: 20, refused: [] });
    await waitFor(
      'the live publishes',
      async () => {
        const status = (await (await fetch(`${metricsUrl}/status`)).json()) as { subscription: string; exported: number }[];
        return status.find((s) => s.subscription.endsWith('/to-table'))?.exported === 320;
      },
      30_000,
    );
    child.kill('SIGTERM');
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code).toBe(0);
    expect(logs).toContain('stopping: finishing writes, finalizing open files');
    expect(logs).not.toContain('S3RVER'); // credentials are never logged

    // The table and the Parquet files' view in one query: one command's start-up.
    const sql = 'SELECT count(*) AS n, count(DISTINCT ordering_key) AS users, (SELECT count(*) FROM to_files) AS files FROM main.events';
    expect(JSON.parse((await orderly('query', job, sql, '--json')).stdout)).toEqual([{ n: '320', users: '13', files: '320' }]);
    const audit = JSON.parse((await orderly('audit', job, 'to-files', '--json')).stdout);
    expect(audit).toMatchObject({
      records: 320,
      keys: 13,
      missing: { count: 0 },
      duplicates: { count: 0 },
      outOfOrderInFile: { count: 0 },
    });
    const status = JSON.parse((await orderly('status', job, '--json')).stdout);
    expect(status.map((s: { backlog: number }) => s.backlog)).toEqual([0, 0]);
    // Usage errors exit 2; exit 1 is what an audit found (missing, duplicate, out-of-order records).
    const unknown = await orderly('audit', job, 'no-such-sub');
    expect([unknown.code, unknown.stderr.trim()]).toEqual([
      2,
      'orderly: Subscription not found: projects/cli-test/subscriptions/no-such-sub',
    ]);
    const empty = await orderly('query', job, '  ');
    expect([empty.code, empty.stderr.trim()]).toEqual([2, 'orderly: <sql>: is empty: give the query to run']);
    // An audit that cannot read the bucket found nothing wrong with the records: exit 3, not 1.
    const parsed = parse(readFileSync(job, 'utf8')) as Record<string, unknown>;
    const unreachable = join(dir.path, 'unreachable.yaml');
    const endpoint = `http://127.0.0.1:${await closedPort()}`;
    writeFileSync(unreachable, stringify({ ...parsed, objectStorage: { endpoint, accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' } }));
    const blind = await orderly('audit', unreachable, 'to-files');
    expect(blind.code).toBe(3);
    expect(blind.stderr).toMatch(/^orderly: the audit could not be completed: cannot read \S+ from bucket cli-exports: /);
    dir.remove();
  }, 120_000);
});
