import { describe, expect, it } from 'vitest';
import { systemClock } from '../../src/core/clock.js';
import { SequenceAllocator } from '../../src/core/sequence-allocator.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { tempDirPerTest } from '../helpers/temp-dir-per-test.js';

const dir = tempDirPerTest();

const message = (orderingKey: string) => ({ data: Buffer.from('x'), attributes: {}, orderingKey });

describe("an ordering key's sequence, handed out by the allocator", () => {
  it('continues from the store for a key of a topic created in this process once the key was forgotten', async () => {
    const store = SqliteStore.open(dir.path);
    try {
      const topic = await store.createTopic('projects/p/topics/t', {}, {});
      // At most 4 keys cached: publishing 5 forgets the longest-cached committed ones.
      const sequences = new SequenceAllocator(store, systemClock, await store.lastSeq(), 4);
      sequences.created(topic.uid);
      const keySeqs = async (keys: string[]) => {
        const stored = sequences.allocate(topic.uid, keys.map(message));
        await store.append(stored);
        sequences.committed(stored[stored.length - 1]!.seq);
        return stored.map((m) => m.keySeq);
      };
      expect(await keySeqs(['a', 'a', 'b'])).toEqual([1, 2, 1]);
      expect(await keySeqs(['c', 'd'])).toEqual([1, 1]);
      // Caching a fifth key forgets 'a' and 'b' (committed, cached first): their sequences are in the store only.
      expect(await keySeqs(['e'])).toEqual([1]);
      expect(await keySeqs(['a', 'b', 'e'])).toEqual([3, 2, 2]);
    } finally {
      await store.close();
    }
  });
});
