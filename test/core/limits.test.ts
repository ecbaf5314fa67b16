import { describe, expect, it } from 'vitest';
import { LIMITS, validateBatch, validateMessage } from '../../src/core/limits.js';
import { messageSize } from '../../src/core/message.js';

const ok = (m: Parameters<typeof validateMessage>[0]) => validateMessage(m, 0);

describe('publish limits (each at and just past its bound)', () => {
  it('data: 10 MB accepted, one byte more refused', () => {
    expect(ok({ data: Buffer.alloc(LIMITS.maxDataBytes, 1) }).data.byteLength).toBe(10_000_000);
    expect(() => ok({ data: Buffer.alloc(LIMITS.maxDataBytes + 1, 1) })).toThrow(
      'messages[0].data: must be at most 10000000 bytes, got 10000001',
    );
  });

  it('attribute count: 100 accepted, 101 refused', () => {
    const attrs = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, 'v']));
    expect(Object.keys(ok({ attributes: attrs(100) }).attributes)).toHaveLength(100);
    expect(() => ok({ attributes: attrs(101) })).toThrow('at most 100 attributes, got 101');
  });

  it('attribute key: 256 bytes accepted, 257 refused; value: 1024 accepted, 1025 refused', () => {
    expect(() => ok({ attributes: { ['k'.repeat(256)]: 'v' } })).not.toThrow();
    expect(() => ok({ attributes: { ['k'.repeat(257)]: 'v' } })).toThrow('key must be 1 to 256 bytes, got 257');
    expect(() => ok({ attributes: { k: 'v'.repeat(1024) } })).not.toThrow();
    expect(() => ok({ attributes: { k: 'v'.repeat(1025) } })).toThrow(
      'messages[0].attributes["k"]: value must be at most 1024 bytes, got 1025',
    );
  });

  it('bytes are counted, not characters (multi-byte UTF-8)', () => {
    expect(() => ok({ attributes: { k: 'é'.repeat(512) } })).not.toThrow();
    expect(() => ok({ attributes: { k: 'é'.repeat(513) } })).toThrow('got 1026');
  });

  it('ordering key: 1024 bytes accepted, 1025 refused', () => {
    expect(ok({ data: 'x', orderingKey: 'k'.repeat(1024) }).orderingKey).toHaveLength(1024);
    expect(() => ok({ data: 'x', orderingKey: 'k'.repeat(1025) })).toThrow('messages[0].orderingKey: must be at most 1024 bytes, got 1025');
  });

  it('a message needs data or an attribute; goog-prefixed attribute keys are reserved', () => {
    expect(() => ok({})).toThrow('non-empty data or at least one attribute');
    expect(() => ok({ data: '' })).toThrow('non-empty data');
    expect(ok({ attributes: { a: '' } }).data.byteLength).toBe(0);
    expect(() => ok({ data: 'x', attributes: { googThing: 'v' } })).toThrow('reserved');
  });

  it('only own attributes count: inherited ones are neither checked nor stored', () => {
    const inherited = Object.create({ a: 'x', googThing: 'v' }) as Record<string, string>;
    expect(() => ok({ attributes: inherited })).toThrow('non-empty data or at least one attribute');
    expect(ok({ data: 'x', attributes: inherited }).attributes).toEqual({});
  });

  it('a message of the wrong shape (a caller without types) is INVALID_ARGUMENT naming the field, never stored as garbage', () => {
    const refused = (input: unknown) => () => validateBatch([input as Parameters<typeof validateMessage>[0]]);
    const invalid = (field: string, detail: string) =>
      expect.objectContaining({ code: 'INVALID_ARGUMENT', field, message: `${field}: ${detail}` });
    expect(refused(null)).toThrow(invalid('messages[0]', 'must be an object with data, attributes and/or orderingKey, got null'));
    expect(refused('text')).toThrow(invalid('messages[0]', 'must be an object with data, attributes and/or orderingKey, got string'));
    expect(refused({ data: 123 })).toThrow(invalid('messages[0].data', 'must be a string or bytes (a Uint8Array or Buffer), got number'));
    expect(refused({ data: { text: 'x' } })).toThrow(
      invalid('messages[0].data', 'must be a string or bytes (a Uint8Array or Buffer), got object'),
    );
    expect(refused({ data: 'x', attributes: 'no' })).toThrow(
      invalid('messages[0].attributes', 'must be an object of string values, got string'),
    );
    expect(refused({ data: 'x', attributes: ['v'] })).toThrow(
      invalid('messages[0].attributes', 'must be an object of string values, got an array'),
    );
    expect(refused({ data: 'x', orderingKey: 5 })).toThrow(invalid('messages[0].orderingKey', 'must be a string, got number'));
    expect(() => validateBatch({ data: 'x' } as unknown as Parameters<typeof validateBatch>[0])).toThrow(
      invalid('messages', 'must be an array of messages, got object'),
    );
  });

  it('batch: 1000 messages accepted, 1001 refused; 10 MiB total', () => {
    const msgs = (n: number) => Array.from({ length: n }, () => ({ data: 'x' }));
    expect(validateBatch(msgs(1000))).toHaveLength(1000);
    expect(() => validateBatch(msgs(1001))).toThrow('at most 1000 messages per publish, got 1001');
    expect(() => validateBatch([])).toThrow('at least one message');
    const big = Buffer.alloc(5 * 1024 * 1024);
    expect(() => validateBatch([{ data: big }, { data: big }])).not.toThrow();
    expect(() => validateBatch([{ data: big }, { data: big }, { data: 'x' }])).toThrow(
      `must be at most ${LIMITS.maxBatchBytes} bytes, got ${LIMITS.maxBatchBytes + 1}`,
    );
  });
});

describe('a message size (flow control bytes)', () => {
  it('is payload, ordering key and own attributes, in UTF-8 bytes', () => {
    const attributes = Object.assign(Object.create({ inherited: 'not counted' }) as Record<string, string>, { é: 'ü', k: 'vv' });
    expect(messageSize({ data: Buffer.alloc(10), orderingKey: 'ké', attributes })).toBe(10 + 3 + (2 + 2) + (1 + 2));
    expect(messageSize({ data: Buffer.alloc(0), orderingKey: '', attributes: {} })).toBe(0);
  });
});
