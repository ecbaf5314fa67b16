import Database from 'better-sqlite3';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { openCore, pullAndAck } from '../helpers/core.js';
import { tempDirPerTest } from '../helpers/temp-dir-per-test.js';

const dir = tempDirPerTest();

/** The store's page size and auto_vacuum mode (0: none, 2: incremental), read from the file itself. */
function layout(file: string): { pageSize: unknown; autoVacuum: unknown } {
  const db = new Database(file, { readonly: true });
  try {
    return { pageSize: db.pragma('page_size', { simple: true }), autoVacuum: db.pragma('auto_vacuum', { simple: true }) };
  } finally {
    db.close();
  }
}

// A page size applies to new stores only: a store keeps the one it was made with (here what Orderly made
// before 32 KiB pages and incremental vacuum), and must go on working with it.
it('a store made with 4 KiB pages and no incremental vacuum keeps them, and publishes, delivers in order, compacts and reopens', async () => {
  const file = join(dir.path, 'orderly.sqlite');
  let { core, clock } = await openCore(dir.path);
  await core.createTopic('orders');
  await core.createSubscription('work', { topic: 'orders', enableMessageOrdering: true });
  await core.publish('orders', [
    { data: 'a1', orderingKey: 'a' },
    { data: 'b1', orderingKey: 'b' },
  ]);
  await core.close();

  const db = new Database(file);
  db.pragma('journal_mode = DELETE');
  db.pragma('page_size = 4096');
  db.pragma('auto_vacuum = NONE');
  db.exec('VACUUM');
  db.pragma('journal_mode = WAL');
  db.close();
  expect(layout(file)).toEqual({ pageSize: 4096, autoVacuum: 0 });

  ({ core, clock } = await openCore(dir.path, clock));
  // 1 KB payloads, so compaction frees pages: a store without incremental vacuum has no way to give them back.
  const pad = 'x'.repeat(1000);
  const later = Array.from({ length: 40 }, (_, i) => ({
    data: `${'ab'[i % 2]}${2 + Math.floor(i / 2)} ${pad}`,
    orderingKey: 'ab'[i % 2]!,
  }));
  await core.publish('orders', later);
  const got = (await pullAndAck(core, 'work')).map((data) => data.split(' ')[0]!);
  expect(['a', 'b'].map((key) => got.filter((data) => data.startsWith(key)))).toEqual(
    ['a', 'b'].map((key) => Array.from({ length: 21 }, (_, i) => `${key}${i + 1}`)),
  );
  await core.flushed();
  expect((await core.compact()).deletedMessages).toBe(42);
  await core.publish('orders', [{ data: 'a22', orderingKey: 'a' }]);
  await core.close();

  ({ core } = await openCore(dir.path, clock));
  expect(await pullAndAck(core, 'work')).toEqual(['a22']);
  await core.close();
  expect(layout(file)).toEqual({ pageSize: 4096, autoVacuum: 0 });
});
