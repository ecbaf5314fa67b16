import { describe, expect, it } from 'vitest';
import { parseFilter } from '../../src/core/filter.js';

describe('subscription filter', () => {
  const cases: [string, Record<string, string>, boolean][] = [
    ['attributes:region', { region: 'eu' }, true],
    ['attributes:region', { other: 'x' }, false],
    ['attributes.region = "eu"', { region: 'eu' }, true],
    ['attributes.region = "eu"', { region: 'us' }, false],
    ['attributes.region != "eu"', { region: 'us' }, true],
    ['attributes.region != "eu"', {}, true],
    ['hasPrefix(attributes.sku, "ab-")', { sku: 'ab-12' }, true],
    ['hasPrefix(attributes.sku, "ab-")', { sku: 'xab-12' }, false],
    ['hasPrefix(attributes.sku, "ab-")', {}, false],
    ['attributes.a = "1" AND attributes.b = "2"', { a: '1', b: '2' }, true],
    ['attributes.a = "1" AND attributes.b = "2"', { a: '1', b: '3' }, false],
    ['attributes.a = "1" OR attributes.b = "2"', { a: '0', b: '2' }, true],
    ['NOT attributes:a', { b: '1' }, true],
    ['-attributes:a', { a: '1' }, false],
    ['(attributes.a = "1" OR attributes.a = "2") AND NOT attributes:skip', { a: '2' }, true],
    ['(attributes.a = "1" OR attributes.a = "2") AND NOT attributes:skip', { a: '2', skip: '' }, false],
    ['attributes.my-key.v2 = "x"', { 'my-key.v2': 'x' }, true],
    ['attributes:"odd key"', { 'odd key': '' }, true],
    ['', {}, true],
  ];
  it.each(cases)('%s on %j -> %s', (filter, attrs, expected) => {
    expect(parseFilter(filter)(attrs)).toBe(expected);
  });

  it.each([
    ['attributes.a = 1', 'expected a quoted string at position 15'],
    ['attributes.a == "1"', 'expected a quoted string'],
    ['data = "x"', 'expected attributes:KEY, attributes.KEY or hasPrefix(...) at position 0'],
    ['attributes.a = "1" AND', 'at position 22'],
    ['(attributes:a', 'expected ")"'],
    ['attributes.a = "unterminated', 'unterminated string'],
  ])('rejects %j with a message naming the position', (filter, message) => {
    expect(() => parseFilter(filter)).toThrow(message);
  });

  it('filters are at most 256 bytes', () => {
    const base = 'attributes:';
    expect(() => parseFilter(base + 'k'.repeat(256 - base.length))).not.toThrow();
    expect(() => parseFilter(base + 'k'.repeat(257 - base.length))).toThrow('filter: must be at most 256 bytes, got 257');
  });
});
