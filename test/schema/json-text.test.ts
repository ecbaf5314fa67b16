import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jsonText, JsonTextError, NumberText, parseJsonText } from '../../src/schema/json-text.js';

describe('json-text: strict JSON with exact 64-bit integers', () => {
  it('reads what JSON.parse reads, except that integers beyond 2^53 come back as exact bigints', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 4 }), (value) => {
        const text = JSON.stringify(value);
        expect(asNumbers(parseJsonText(text))).toEqual(JSON.parse(text));
      }),
      { numRuns: 300 },
    );
  });

  it('jsonText writes what JSON.stringify writes, and bigints as their exact integers (read back by parseJsonText)', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 4 }), (value) => {
        expect(jsonText(value)).toBe(JSON.stringify(value));
      }),
      { numRuns: 300 },
    );
    const value = { n: -9223372036854775808n, list: [18446744073709551615n, 1, undefined], skipped: undefined, s: 'a"\u0000' };
    expect(jsonText(value)).toBe('{"n":-9223372036854775808,"list":[18446744073709551615,1,null],"s":"a\\"\\u0000"}');
    expect(parseJsonText(jsonText(value))).toEqual({ n: -9223372036854775808n, list: [18446744073709551615n, 1, null], s: 'a"\u0000' });
  });

  it('keeps integers beyond 2^53 exact as bigint, and others as numbers', () => {
    expect(parseJsonText('9007199254740993')).toBe(9007199254740993n);
    expect(parseJsonText('-9223372036854775808')).toBe(-9223372036854775808n);
    expect(parseJsonText('18446744073709551615')).toBe(18446744073709551615n);
    expect(parseJsonText('9007199254740991')).toBe(9007199254740991);
    expect(parseJsonText('1.5e3')).toBe(1500);
    expect(parseJsonText('[1, 2.5, -0]')).toEqual([1, 2.5, -0]);
  });

  it('with exactNumbers, keeps the text of a number literal a double would change, and only of those', () => {
    const exact = (text: string) => parseJsonText(text, { exactNumbers: true });
    expect(exact('12345678901234567.89')).toEqual(new NumberText('12345678901234567.89'));
    expect(exact('1.23456789012345678')).toEqual(new NumberText('1.23456789012345678'));
    expect(exact('-1.00000000000000000001e5')).toEqual(new NumberText('-1.00000000000000000001e5'));
    // The same value, however written: a double holds it.
    for (const [text, value] of [
      ['1.50', 1.5],
      ['0.1', 0.1],
      ['15e-1', 1.5],
      ['1e300', 1e300],
      ['-0.0', -0],
      ['2.5E+3', 2500],
    ] as const)
      expect(exact(text)).toBe(value);
    // Without the option, as JSON.parse reads it.
    expect(parseJsonText('12345678901234567.89')).toBe(JSON.parse('12345678901234567.89'));
  });

  it('reads an escaped surrogate pair as its character, and refuses half of one alone (it would be stored as U+FFFD)', () => {
    expect(parseJsonText(String.raw`"\ud83d\ude00"`)).toBe('😀');
    expect(() => parseJsonText(String.raw`"\ud800"`)).toThrow('a high surrogate escape (\\ud800-\\udbff) must be followed by a low one');
    expect(() => parseJsonText(String.raw`"\ud800\u0041"`)).toThrow('must be followed by a low one');
    expect(() => parseJsonText(String.raw`"\udc00"`)).toThrow('a lone low surrogate escape (\\udc00-\\udfff) is not a character');
  });

  it('refuses duplicate keys, naming the line and column of the second', () => {
    const e = catchError(() => parseJsonText('{\n  "a": 1,\n  "a": 2\n}'));
    expect(e).toBeInstanceOf(JsonTextError);
    expect(e).toMatchObject({ line: 3, column: 3 });
    expect(e.message).toBe('duplicate key "a" at line 3, column 3');
  });

  it('names the line and column of a syntax error', () => {
    expect(catchError(() => parseJsonText('{"a": 1,\n "b": }')).message).toBe('unexpected "}" at line 2, column 7');
    expect(catchError(() => parseJsonText('{"a": 1} x')).message).toBe('unexpected "x" after the JSON value at line 1, column 10');
    expect(catchError(() => parseJsonText('"abc')).message).toBe('unterminated string at line 1, column 5');
    expect(catchError(() => parseJsonText('01')).message).toBe('unexpected "1" after the JSON value at line 1, column 2');
    expect(catchError(() => parseJsonText('{"a" 1}')).message).toBe('expected \':\', got "1}" at line 1, column 6');
    expect(catchError(() => parseJsonText('"\t"')).message).toContain('unescaped control character U+0009');
    expect(catchError(() => parseJsonText('')).message).toBe('unexpected end of text at line 1, column 1');
  });

  it('reads "__proto__" as an ordinary key (no prototype change)', () => {
    const value = parseJsonText('{"__proto__": {"polluted": true}}') as Record<string, unknown>;
    expect(Object.keys(value)).toEqual(['__proto__']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.getPrototypeOf(value)).toBeNull();
  });

  it('refuses nesting deeper than 512 levels instead of overflowing the stack', () => {
    expect(parseJsonText('['.repeat(500) + ']'.repeat(500))).toBeDefined();
    expect(catchError(() => parseJsonText('['.repeat(100_000))).message).toContain('nesting deeper than 512 levels');
  });
});

/** Turns bigints back into numbers, checking each was an integer JSON.parse would have rounded. */
function asNumbers(value: unknown): unknown {
  if (typeof value === 'bigint') {
    expect(Number.isSafeInteger(Number(value))).toBe(false);
    return Number(value);
  }
  if (Array.isArray(value)) return value.map(asNumbers);
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, asNumbers(v)]));
  return value;
}

function catchError(fn: () => unknown): Error & { line?: number; column?: number } {
  try {
    fn();
  } catch (e) {
    return e as Error;
  }
  throw new Error('expected an error');
}
