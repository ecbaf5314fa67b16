import { chmodSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { orderly, orderlyAsUser } from '../helpers/cli.js';
import { tempDirPerTest } from '../helpers/temp-dir-per-test.js';

/**
 * A data directory its user may not write (another user's, a read-only mount): every command, a read-only
 * one too, writes its lock file and SQLite's -shm there. `orderly status` and `audit` failed with
 * "cannot lock the data directory ... (orderly.lock.db): unable to open database file" (SQLite's words),
 * or "EACCES ... open 'orderly.lock.<pid>'" once the lock's database existed, saying nothing of what to do.
 */
const dir = tempDirPerTest();

it('status, audit and query on a data directory this user cannot write are refused with the directory and what to do', async () => {
  const data = join(dir.path, 'data');
  const job = join(dir.path, 'job.yaml');
  writeFileSync(
    job,
    `projectId: unwritable\ndataDir: ${data}\ntopics: [{ name: orders }]\nsubscriptions: [{ name: orders-all, topic: orders }]\n`,
  );
  writeFileSync(join(dir.path, 'one.jsonl'), '{"n":1}\n');
  expect((await orderly('publish', job, '--topic', 'orders', '--file', join(dir.path, 'one.jsonl'))).code).toBe(0);
  const files = readdirSync(data).sort();
  chmodSync(dir.path, 0o755);
  chmodSync(job, 0o644);
  chmodSync(data, 0o555);
  for (const f of files) chmodSync(join(data, f), 0o666);

  const said = (stderr: string) => {
    expect(stderr).toContain(`the data directory ${data} cannot be written by this user (EACCES)`);
    expect(stderr).toContain('Let this user write the directory');
    expect(stderr).not.toMatch(/unable to open database file|orderly\.lock\.\d+|\n\s+at /);
  };
  const status = await orderlyAsUser(['status', job]);
  expect(status.code, status.stderr).toBe(1);
  said(status.stderr);
  const json = await orderlyAsUser(['status', job, '--json']);
  expect(json.code).toBe(1);
  expect((JSON.parse(json.stdout) as { error: { code: string } }).error.code).toBe('FAILED_PRECONDITION');
  // An audit that could not look says so (exit 3), not that the records are wrong (1).
  const audit = await orderlyAsUser(['audit', job, 'orders-all']);
  expect(audit.code, audit.stderr).toBe(3);
  said(audit.stderr);
  const query = await orderlyAsUser(['query', job, 'SELECT 1']);
  expect(query.code, query.stderr).toBe(1);
  said(query.stderr);
  expect(readdirSync(data).sort()).toEqual(files);
}, 120_000);
