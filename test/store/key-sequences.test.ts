import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { tempDirPerTest } from '../helpers/temp-dir-per-test.js';

const dir = tempDirPerTest();

describe("a publish's new ordering keys, looked up in one query", () => {
  it('finds the last key sequence of each key after a restart, also of keys JSON does not carry exactly; 0 for a new key', async () => {
    // A lone surrogate, a NUL, JSON's own quoting characters, non-ASCII.
    const keys = ['\ud800x', 'a\u0000b', '"q\\', 'ünï', 'plain'];
    let store = SqliteStore.open(dir.path);
    await store.append(
      keys.map((orderingKey, i) => ({
        seq: i + 1,
        topicUid: 1,
        orderingKey,
        keySeq: 10 + i,
        publishTime: 0,
        data: Buffer.from('x'),
        attributes: {},
      })),
    );
    await store.close();
    store = SqliteStore.open(dir.path);
    const last = store.lastKeySeqs(1, [...keys, 'new-key']);
    expect([...last]).toEqual([...keys.map((key, i) => [key, 10 + i]), ['new-key', 0]]);
    expect(store.lastKeySeqs(2, ['plain']).get('plain')).toBe(0); // another topic's key
    await store.close();
  });
});
