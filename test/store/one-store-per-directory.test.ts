import { symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { PubSubCore } from '../../src/core/pubsub-core.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { StoreInUseError } from '../../src/store/store.js';
import { tempDirPerTest } from '../helpers/temp-dir-per-test.js';

const dir = tempDirPerTest();

it('a store open in this process cannot be opened again, by any path to it, until it is closed', async () => {
  const data = join(dir.path, 'data');
  const core = await PubSubCore.open({ store: SqliteStore.open(data, { durability: 'process' }) });
  await core.createTopic('events');
  await core.publish('events', [{ data: 'first' }]);
  const link = join(dir.path, 'link');
  symlinkSync(data, link);
  for (const path of [data, link, `${data}/.`]) {
    expect(() => SqliteStore.open(path)).toThrow(StoreInUseError);
    expect(() => SqliteStore.open(path)).toThrow(
      expect.objectContaining({ code: 'FAILED_PRECONDITION', message: expect.stringContaining('is already open in this process') }),
    );
  }
  await core.close();
  // Closed, it opens again, with what the first one wrote.
  const again = await PubSubCore.open({ store: SqliteStore.open(link, { durability: 'process' }) });
  await again.createSubscription('events-sub', { topic: 'events' });
  await again.publish('events', [{ data: 'second' }]);
  expect((await again.pull('events-sub')).map((m) => m.message.data.toString())).toEqual(['second']);
  await again.close();
});
