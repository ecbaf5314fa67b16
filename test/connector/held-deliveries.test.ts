import { describe, expect, it } from 'vitest';
import type { ReceivedMessage } from '../../src/core/message.js';
import { HeldDeliveries } from '../../src/connector/held-deliveries.js';

function delivery(ackId: string, messageId: string): ReceivedMessage {
  return {
    ackId,
    message: { messageId, publishTime: new Date(0), data: Buffer.from('abc'), attributes: {}, orderingKey: 'k', sequence: 1 },
    deliveryAttempt: 0,
  };
}

describe('HeldDeliveries', () => {
  it('names a first delivery by its message id and a copy held beside it apart, and counts both', () => {
    const held = new HeldDeliveries();
    const first = delivery('a-1', '7');
    const copy = delivery('a-2', '7');
    expect(held.add(first)).toBe(false);
    expect(held.add(copy)).toBe(true);
    expect(held.count('7')).toBe(2);
    expect(held.idOf(first)).toBe('7');
    expect(held.idOf(copy)).not.toBe('7');
    expect(held.get(held.idOf(copy))).toBe(copy);
    expect(held.size).toBe(2);
    expect(held.bytes).toBe(2 * (3 + 1));
  });

  it('still sees a copy once the first is settled, and none once both are', () => {
    const held = new HeldDeliveries();
    const first = delivery('a-1', '7');
    const copy = delivery('a-2', '7');
    held.add(first);
    held.add(copy);
    expect(held.release('7')).toBe(first);
    expect(held.release('7')).toBeUndefined();
    expect(held.count('7')).toBe(1);
    // A third delivery while the copy is held is a redelivery too.
    const third = delivery('a-3', '7');
    expect(held.add(third)).toBe(true);
    expect(held.count('7')).toBe(2);
    expect(held.release(held.idOf(copy))).toBe(copy);
    expect(held.release(held.idOf(third))).toBe(third);
    expect(held.count('7')).toBe(0);
    expect(held.add(delivery('a-4', '7'))).toBe(false);
    expect(held.size).toBe(1);
  });

  it('keeps a message id that looks like a copy id apart from the copies', () => {
    const held = new HeldDeliveries();
    const plain = delivery('x', '5');
    const copy = delivery('x', '5');
    const odd = delivery('b-1', '\u0000x');
    held.add(plain);
    held.add(copy);
    expect(held.add(odd)).toBe(false);
    expect(held.count('\u0000x')).toBe(1);
    expect(held.size).toBe(3);
    expect(held.release(held.idOf(odd))).toBe(odd);
    expect(held.count('5')).toBe(2);
  });
});
