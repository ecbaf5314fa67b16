import { describe, expect, it } from 'vitest';
import { parseFilter } from '../../src/core/filter.js';
import { openCore, pullAndAck, settle } from '../helpers/core.js';
import { tempDir } from '../helpers/temp-dir.js';

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
    ['attributes.my-key_2 = "x"', { 'my-key_2': 'x' }, true],
    ['attributes."my-key.v2" = "x"', { 'my-key.v2': 'x' }, true],
    ['attributes:a AND (attributes:b OR attributes:c)', { a: '', c: '' }, true],
    ['(attributes:a AND attributes:b) OR attributes:c', { c: '' }, true],
    ['attributes:a OR attributes:b OR attributes:c', { c: '' }, true],
    ['attributes:"odd key"', { 'odd key': '' }, true],
    // Keys with other characters are string literals, as in Google's `attributes."iana.org/language_tag"`.
    ['attributes."iana.org/language_tag" = "en"', { 'iana.org/language_tag': 'en' }, true],
    ['attributes."iana.org/language_tag" != "en"', { 'iana.org/language_tag': 'en' }, false],
    ['hasPrefix(attributes."a b", "x")', { 'a b': 'xy' }, true],
    // Escapes mean their characters; before, `\u00e9` matched the letters "u00e9".
    [String.raw`attributes.name = "\u00e9"`, { name: 'é' }, true],
    [String.raw`attributes.name = "\u00e9"`, { name: 'u00e9' }, false],
    [String.raw`attributes:"\u307F\u3093\u306A"`, { みんな: '' }, true],
    [String.raw`attributes.k = "\x41\101\U0001F600"`, { k: 'AA😀' }, true],
    [String.raw`attributes.k = "a\"b\\c\n"`, { k: 'a"b\\c\n' }, true],
    [String.raw`attributes.k = 'it\'s'`, { k: "it's" }, true],
    ['', {}, true],
    // A key that names a member of Object.prototype is an attribute like any other.
    ['hasPrefix(attributes.constructor, "f")', { k: 'v' }, false],
    ['hasPrefix(attributes.constructor, "f")', { constructor: 'fx' }, true],
    ['hasPrefix(attributes.toString, "")', {}, false],
    ['attributes.valueOf = "x"', { valueOf: 'x' }, true],
    ['attributes.constructor != "x"', {}, true],
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
    ['attributes.a = "x\\', 'unterminated string'],
    ['attributes.a = "\\q"', 'unknown escape sequence "\\q" at position 16'],
    ['attributes.a = "\\u00e"', 'escape sequence "\\u" needs 4 hexadecimal digits'],
    ['attributes.a = "\\x4"', 'escape sequence "\\x" needs 2 hexadecimal digits'],
    ['attributes.a = "\\18"', 'escape sequence "\\1" needs 3 octal digits'],
    ['attributes.a = "\\ud800"', 'escape sequence "\\ud800" is not a Unicode character'],
    ['attributes.a = "\\U00110000"', 'is not a Unicode character'],
    ['attributes. "k" = "v"', 'expected attributes.KEY'],
    // Pub/Sub refuses AND beside OR without parentheses, and bare keys with other characters.
    [
      'attributes:a AND attributes:b OR attributes:c',
      'AND and OR cannot be combined without parentheses: group them, as in "(attributes:a AND attributes:b) OR attributes:c" at position 30',
    ],
    [
      'attributes:a OR attributes:b AND attributes:c',
      'AND and OR cannot be combined without parentheses: group them, as in "(attributes:a AND attributes:b) OR attributes:c" at position 29',
    ],
    ['(attributes:a OR attributes:b AND attributes:c)', 'AND and OR cannot be combined without parentheses'],
    [
      'attributes.a.b = "x"',
      'attribute key "a.b" has characters other than letters, digits, "-" and "_": write it as a string literal, attributes."a.b" at position 11',
    ],
    [
      'attributes:k.x',
      'attribute key "k.x" has characters other than letters, digits, "-" and "_": write it as a string literal, attributes."k.x" at position 11',
    ],
    ['hasPrefix(attributes.a+b, "x")', 'attribute key "a+b" has characters other than letters, digits'],
  ])('rejects %j with a message naming the position', (filter, message) => {
    expect(() => parseFilter(filter)).toThrow(message);
  });

  it('a stored filter (an existing subscription, read as the store opens) keeps reading an escape it was created with as its letter', () => {
    expect(parseFilter(String.raw`attributes.a = "\q\u00e"`, { stored: true })({ a: 'qu00e' })).toBe(true);
    expect(parseFilter(String.raw`attributes.a = "\u00e9"`, { stored: true })({ a: 'é' })).toBe(true);
  });

  it('a stored filter keeps its dotted bare key and AND binding tighter than OR, as it was created with', () => {
    expect(parseFilter('attributes.a.b = "x"', { stored: true })({ 'a.b': 'x' })).toBe(true);
    const mixed = parseFilter('attributes:a AND attributes:b OR attributes:c', { stored: true });
    expect([mixed({ c: '' }), mixed({ a: '' }), mixed({ a: '', b: '' })]).toEqual([true, false, true]);
  });

  it('filters are at most 256 bytes', () => {
    const base = 'attributes:';
    expect(() => parseFilter(base + 'k'.repeat(256 - base.length))).not.toThrow();
    expect(() => parseFilter(base + 'k'.repeat(257 - base.length))).toThrow('filter: must be at most 256 bytes, got 257');
  });
});

describe('a filtered subscription in the core', () => {
  it('a filter on an attribute named like a member of Object.prototype neither fails the publish nor the other subscriptions', async () => {
    const dir = tempDir();
    const { core } = await openCore(dir.path);
    try {
      await core.createTopic('events');
      await core.createSubscription('picky', { topic: 'events', filter: 'hasPrefix(attributes.constructor, "f")' });
      await core.createSubscription('all', { topic: 'events' });
      // The first message has no `constructor` attribute: its publish answered INTERNAL, after it was stored.
      await core.publish('events', [{ data: 'plain', attributes: { k: 'v' } }]);
      await core.publish('events', [{ data: 'match', attributes: { constructor: 'fx' } }]);
      await settle(core);
      expect(await pullAndAck(core, 'picky')).toEqual(['match']);
      expect((await pullAndAck(core, 'all')).sort()).toEqual(['match', 'plain']);
    } finally {
      await core.close();
      dir.remove();
    }
  });
});
