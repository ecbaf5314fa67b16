import { afterEach, beforeEach, expect, it } from 'vitest';
import { PubSubCore } from '../../src/core/pubsub-core.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { tempDir } from '../helpers/temp-dir.js';

let dir: ReturnType<typeof tempDir>;
const unhandled: unknown[] = [];
const record = (reason: unknown) => unhandled.push(reason);

beforeEach(() => {
  dir = tempDir();
  unhandled.length = 0;
  process.on('unhandledRejection', record);
});
afterEach(() => {
  process.off('unhandledRejection', record);
  dir.remove();
});

it('a failed compaction rejects its caller only: no unhandled rejection that would end the process', async () => {
  const store = SqliteStore.open(dir.path, { durability: 'process' });
  const core = await PubSubCore.open({ store, projectId: 'p' });
  await core.createTopic('orders');
  // The store failing under the core (as a full or lost disk does): every write is refused.
  await store.close();
  await expect(core.compact()).rejects.toThrow('the store is closed');
  // Unhandled rejections are reported after the microtasks of the turn they happened in.
  await new Promise((resolve) => setTimeout(resolve, 10));
  expect(unhandled).toEqual([]);
  await core.close();
});
