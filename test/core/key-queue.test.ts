import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import type { Entry } from '../../src/core/key-queue.js';
import { KeyQueue } from '../../src/core/key-queue.js';
import type { StoredMessage } from '../../src/store/store.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

function entry(seq: number): Entry {
  const message = { seq, data: Buffer.alloc(1024) } as unknown as StoredMessage;
  return { message, spilled: false, size: 1024, acked: false, failures: 0, deliveries: 0, deadLetter: undefined };
}

function pushed(queue: KeyQueue, seq: number): Entry {
  const e = entry(seq);
  queue.push(e);
  return e;
}

describe('KeyQueue', () => {
  it('lets go of acked entries of a key that never goes idle (their payloads are garbage)', async () => {
    const queue = new KeyQueue('k', true);
    const firstPayload = new WeakRef(pushed(queue, 1).message.data);
    const dropped: Entry[] = [];
    // The key keeps receiving: each delivery is acked while a later message already waits.
    for (let seq = 2; seq <= 100; seq++) {
      pushed(queue, seq);
      const delivered = queue.takeNext()!;
      delivered.acked = true;
      queue.trimAcked((e) => dropped.push(e));
    }
    expect(dropped.map((e) => e.message.seq)).toEqual(Array.from({ length: 99 }, (_, i) => i + 1));
    expect(queue.size).toBe(1);
    expect([...queue.entries()].map((e) => e.message.seq)).toEqual([100]);
    dropped.length = 0;
    // A WeakRef's target survives the job that created it: collect in a later one.
    await new Promise((resolve) => setImmediate(resolve));
    gc();
    expect(firstPayload.deref()).toBeUndefined();
  });
});
