import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { OrderlyError } from '../../src/core/errors.js';
import { acquireLock, processIdentity, readLock } from '../../src/job/job-lock.js';
import { bareJob } from '../../src/job/job-config.js';
import { JobRuntime } from '../../src/job/job-runtime.js';
import { createLogger } from '../../src/log.js';
import { tempDir } from '../helpers/temp-dir.js';

let dir: ReturnType<typeof tempDir>;
const children: ChildProcess[] = [];
beforeEach(() => {
  dir = tempDir();
});
afterEach(() => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
  dir.remove();
});

/** A live process that is not this one (locks naming this process are its own). */
async function sleeper(): Promise<number> {
  const child = spawn('sleep', ['60'], { stdio: 'ignore' });
  children.push(child);
  await once(child, 'spawn');
  return child.pid!;
}
const lockFile = () => join(dir.path, 'orderly.lock');
const writeLock = (lock: object) => writeFileSync(lockFile(), JSON.stringify(lock));

describe('the data directory lock', () => {
  it("records the holder's pid and start time; a second holder is refused while the first runs", async () => {
    const release = acquireLock(dir.path, { metrics: 'http://127.0.0.1:1' });
    const lock = JSON.parse(readFileSync(lockFile(), 'utf8'));
    expect(lock).toEqual({ pid: process.pid, startTime: processIdentity(process.pid)?.startTime, metrics: 'http://127.0.0.1:1' });
    release();
    const pid = await sleeper();
    writeLock({ pid, startTime: processIdentity(pid)?.startTime });
    expect(readLock(dir.path)?.pid).toBe(pid);
    expect(() => acquireLock(dir.path)).toThrow(`the data directory ${dir.path} is in use by a running job (pid ${pid}); stop it first`);
  });

  it('a command holding the directory for its own work (query, audit, status, publish) is named as one, not as a running job', async () => {
    const runtime = await JobRuntime.start(bareJob(dir.path), createLogger(), { mode: 'inspect' });
    expect(JSON.parse(readFileSync(lockFile(), 'utf8'))).toMatchObject({ pid: process.pid, briefly: true });
    await runtime.stop();
    const pid = await sleeper();
    writeLock({ pid, startTime: processIdentity(pid)?.startTime, briefly: true });
    const busy =
      `orderly: the data directory ${dir.path} is in use by another orderly command (pid ${pid}: a query, audit, status or publish), ` +
      'not a running job; try again once it has finished';
    // A second query was told "in use by a running job", status that the job "serves no status", and publish
    // that "the job is running without a Pub/Sub endpoint".
    const job = join(dir.path, 'job.yaml');
    writeFileSync(job, 'dataDir: .\ntopics: [{ name: events }]\n');
    const bin = fileURLToPath(new URL('../../bin/orderly.js', import.meta.url));
    const orderly = (...args: string[]) =>
      promisify(execFile)(process.execPath, [bin, ...args], { encoding: 'utf8' }).then(
        () => 'exit 0',
        (e: { stderr: string }) => e.stderr.trim(),
      );
    expect(await orderly('query', job, 'SELECT 1')).toBe(busy);
    expect(await orderly('status', job)).toBe(busy);
    expect(await orderly('publish', job, '--topic', 'events', '--file', job)).toBe(busy);
  });

  it('a job starting at this moment (its lock file not written yet) keeps a second start out: two starts at once both ran the directory', async () => {
    // Another process takes the lock, then its lock file is removed: what a process between taking the lock
    // and writing its file leaves. Checking the file and then writing it let both processes of a pair
    // started together through.
    const script = `import('./src/job/job-lock.ts').then(({ acquireLock }) => {
      acquireLock(${JSON.stringify(dir.path)});
      require('node:fs').rmSync(${JSON.stringify(lockFile())});
      console.log('held');
      setInterval(() => {}, 1000);
    })`;
    const child = spawn(process.execPath, ['--import', 'tsx', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    await once(child.stdout, 'data');
    expect(readLock(dir.path)).toBeUndefined();
    expect(() => acquireLock(dir.path)).toThrow(`the data directory ${dir.path} is in use by a running job; stop it first`);
    child.kill('SIGKILL');
    await once(child, 'exit');
    // Gone however it ended: the next start takes the directory.
    acquireLock(dir.path)();
  });

  it("a job's start waits for a command holding the directory briefly (a restart while a monitor's status read the store had been refused, the job left down)", async () => {
    const script = `import('./src/job/job-lock.ts').then(({ acquireLock }) => {
      const release = acquireLock(${JSON.stringify(dir.path)}, { briefly: true });
      console.log('held');
      setTimeout(() => { release(); process.exit(0); }, 1000);
    })`;
    const child = spawn(process.execPath, ['--import', 'tsx', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    await once(child.stdout, 'data');
    expect(readLock(dir.path)).toMatchObject({ pid: child.pid, briefly: true });
    const runtime = await JobRuntime.start(bareJob(dir.path), createLogger());
    expect(readLock(dir.path)?.pid).toBe(process.pid);
    await runtime.stop();
    const pid = await sleeper();
    writeLock({ pid, startTime: processIdentity(pid)?.startTime });
    await expect(JobRuntime.start(bareJob(dir.path), createLogger())).rejects.toThrow(`is in use by a running job (pid ${pid})`);
  });

  // /proc is Linux's; elsewhere the check falls back to kill(pid, 0) and cannot tell these cases apart.
  it.skipIf(process.platform !== 'linux')('a live pid with another start time is a reused pid: the lock is stale', async () => {
    const pid = await sleeper();
    expect(processIdentity(pid)?.startTime).toMatch(/^\d+$/);
    writeLock({ pid, startTime: String(Number(processIdentity(pid)!.startTime) - 1) });
    expect(readLock(dir.path)).toBeUndefined();
    const release = acquireLock(dir.path);
    expect(JSON.parse(readFileSync(lockFile(), 'utf8')).pid).toBe(process.pid);
    release();
  });

  it.skipIf(process.platform !== 'linux')('a killed process its parent has not reaped yet (a zombie) holds no lock', async () => {
    // The shell starts a short `sleep` in the background, then becomes a long `sleep`, which never reaps it:
    // when the short one ends it stays a zombie.
    const parent = spawn('sh', ['-c', 'sleep 2 & echo $!; exec sleep 60'], { stdio: ['ignore', 'pipe', 'ignore'] });
    children.push(parent);
    const [line] = (await once(parent.stdout, 'data')) as [Buffer];
    const pid = Number(line.toString().trim());
    const deadline = Date.now() + 20_000;
    while (!processIdentity(pid)?.zombie && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(processIdentity(pid)?.zombie).toBe(true);
    expect(() => process.kill(pid, 0)).not.toThrow(); // what fooled the old check
    writeLock({ pid, startTime: processIdentity(pid)!.startTime });
    expect(readLock(dir.path)).toBeUndefined();
  });

  it('a lock of a process that is gone, or an empty lock file, is stale; garbage is refused with the file named', async () => {
    const child = spawn('true', { stdio: 'ignore' });
    await once(child, 'exit');
    writeLock({ pid: child.pid, startTime: '1' });
    expect(readLock(dir.path)).toBeUndefined();
    writeFileSync(lockFile(), '');
    expect(readLock(dir.path)).toBeUndefined();
    writeFileSync(lockFile(), '{"pid": 12');
    expect(() => readLock(dir.path)).toThrow(
      `the lock file ${lockFile()} is not readable JSON; if no orderly process runs on ${dir.path}, remove it`,
    );
  });

  it('a lock file that cannot be read (a directory in its place) is refused with the file named', () => {
    mkdirSync(lockFile());
    // Node's "EISDIR: illegal operation on a directory, read" had named no file.
    expect(() => readLock(dir.path)).toThrow(
      new OrderlyError(
        'FAILED_PRECONDITION',
        `cannot read the lock file ${lockFile()}: EISDIR: illegal operation on a directory, read; if no orderly process runs on ${dir.path}, remove it`,
      ),
    );
  });
});
