import { InvalidArgumentError } from './errors.js';

/**
 * Pub/Sub subscription filters (attributes only): `attributes:KEY`, `attributes.KEY = "v"`, `!=`,
 * `hasPrefix(attributes.KEY, "p")`, `AND` / `OR` / `NOT` (or `-`), parentheses. Hand-written because no
 * library parses this small language; grammar from https://cloud.google.com/pubsub/docs/subscription-message-filter.
 * What Pub/Sub refuses is refused here too, so a filter accepted here works there: `AND` and `OR` at the
 * same level without parentheses, and a bare key with characters other than letters, digits, `-` and `_`.
 */
export type Filter = (attributes: Record<string, string>) => boolean;

export const MAX_FILTER_BYTES = 256;

type Token = { kind: 'word' | 'string' | 'op'; text: string; at: number };

function tokenize(src: string, stored: boolean): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < src.length) {
    const c = src[i]!;
    if (/\s/.test(c)) {
      i++;
    } else if (c === '"' || c === "'") {
      let j = i + 1;
      let text = '';
      while (j < src.length && src[j] !== c) {
        if (src[j] === '\\') {
          const escape = unescape(src, j, stored);
          text += escape.text;
          j = escape.end;
        } else {
          text += src[j];
          j++;
        }
      }
      if (j >= src.length) throw fail(src, i, 'unterminated string');
      tokens.push({ kind: 'string', text, at: i });
      i = j + 1;
    } else if (src.startsWith('!=', i)) {
      tokens.push({ kind: 'op', text: '!=', at: i });
      i += 2;
    } else if ('()=:,-'.includes(c)) {
      tokens.push({ kind: 'op', text: c, at: i });
      i++;
    } else {
      // Attribute names may hold '.' and '-', so `attributes.my-key` arrives as one word.
      const m = /^[A-Za-z0-9_~+%][A-Za-z0-9_~+%.-]*/.exec(src.slice(i));
      if (!m) throw fail(src, i, `unexpected character "${c}"`);
      tokens.push({ kind: 'word', text: m[0], at: i });
      i += m[0].length;
    }
  }
  return tokens;
}

const SIMPLE_ESCAPES: Record<string, string> = {
  a: '\x07',
  b: '\b',
  f: '\f',
  n: '\n',
  r: '\r',
  t: '\t',
  v: '\v',
  '\\': '\\',
  '"': '"',
  "'": "'",
  '`': '`',
  '?': '?',
};

/**
 * The escape sequence at `src[at]` (a backslash) inside a string literal: Google's filters take the
 * simple escapes and Unicode (`\uXXXX`, `\UXXXXXXXX`), hexadecimal (`\xHH`) and octal (`\NNN`) ones.
 * Any other escape is refused rather than read as its letter, which would match another value; except in
 * a filter stored before escapes were read, which keeps the reading it was created with (its letter), so
 * that the store still opens and the subscription filters as it did.
 */
function unescape(src: string, at: number, stored: boolean): { text: string; end: number } {
  const c = src[at + 1];
  if (c === undefined) throw fail(src, at, 'unterminated string');
  const simple = SIMPLE_ESCAPES[c];
  if (simple !== undefined) return { text: simple, end: at + 2 };
  const refuse = (detail: string) => {
    if (stored) return { text: c, end: at + 2 };
    throw fail(src, at, detail);
  };
  const octal = c >= '0' && c <= '3';
  const digits = octal ? 3 : c === 'x' ? 2 : c === 'u' ? 4 : c === 'U' ? 8 : 0;
  if (digits === 0) return refuse(`unknown escape sequence "\\${c}"`);
  const start = octal ? at + 1 : at + 2;
  const body = src.slice(start, start + digits);
  if (body.length !== digits || !(octal ? /^[0-7]+$/ : /^[0-9A-Fa-f]+$/).test(body))
    return refuse(`escape sequence "\\${c}" needs ${digits} ${octal ? 'octal' : 'hexadecimal'} digits`);
  const code = parseInt(body, octal ? 8 : 16);
  if (code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff))
    return refuse(`escape sequence "\\${src.slice(at + 1, start + digits)}" is not a Unicode character`);
  return { text: String.fromCodePoint(code), end: start + digits };
}

/** Characters a key may have outside a string literal (`attributes."a.b"` otherwise). */
const BARE_KEY = /^[A-Za-z0-9_-]+$/;

/**
 * The message's value of attribute `key`, if it has one. Its own attributes only: `attributes[key]` also
 * reads the object's prototype, so a key such as `constructor` or `toString` found a function on every
 * message without it (`hasPrefix` then threw, failing the publish that offered the message).
 */
function attribute(attributes: Record<string, string>, key: string): string | undefined {
  return Object.hasOwn(attributes, key) ? attributes[key] : undefined;
}

function fail(src: string, at: number, detail: string): InvalidArgumentError {
  return new InvalidArgumentError('filter', `${detail} at position ${at} in ${JSON.stringify(src)}`);
}

/**
 * `stored`: the filter of an existing subscription, read when the store opens. It keeps the reading it
 * was created with, so that the store still opens and the subscription filters as it did: an unknown
 * escape as its letter (see unescape), a dotted bare key as one key, `AND` binding tighter than `OR`.
 */
export function parseFilter(src: string, { stored = false } = {}): Filter {
  if (Buffer.byteLength(src) > MAX_FILTER_BYTES) {
    throw new InvalidArgumentError('filter', `must be at most ${MAX_FILTER_BYTES} bytes, got ${Buffer.byteLength(src)}`);
  }
  if (src.trim() === '') return () => true;
  const tokens = tokenize(src, stored);
  let pos = 0;
  const peek = () => tokens[pos];
  const atEnd = () => pos >= tokens.length;
  const expect = (text: string): Token => {
    const t = tokens[pos];
    if (!t || t.text !== text) throw fail(src, t?.at ?? src.length, `expected "${text}"`);
    pos++;
    return t;
  };
  const isWord = (t: Token | undefined, w: string) => t?.kind === 'word' && t.text === w;
  const bareKey = (key: string, at: number): string => {
    if (!stored && !BARE_KEY.test(key))
      throw fail(
        src,
        at,
        `attribute key ${JSON.stringify(key)} has characters other than letters, digits, "-" and "_": write it as a string literal, attributes.${JSON.stringify(key)}`,
      );
    return key;
  };

  const attributeName = (): string => {
    const t = tokens[pos];
    if (!t || (t.kind !== 'word' && t.kind !== 'string')) throw fail(src, t?.at ?? src.length, 'expected an attribute name');
    pos++;
    return t.kind === 'word' ? bareKey(t.text, t.at) : t.text;
  };
  /** `attributes.KEY` (one word) or `attributes."KEY"` (a key with other characters, as Google writes it) -> KEY */
  const dottedAttribute = (): string => {
    const t = tokens[pos];
    const quoted = tokens[pos + 1];
    if (t?.kind === 'word' && t.text === 'attributes.' && quoted?.kind === 'string' && quoted.at === t.at + t.text.length) {
      pos += 2;
      return quoted.text;
    }
    if (t?.kind !== 'word' || !t.text.startsWith('attributes.') || t.text.length === 'attributes.'.length) {
      throw fail(src, t?.at ?? src.length, 'expected attributes.KEY');
    }
    pos++;
    return bareKey(t.text.slice('attributes.'.length), t.at + 'attributes.'.length);
  };
  const str = (): string => {
    const t = tokens[pos];
    if (!t || t.kind !== 'string') throw fail(src, t?.at ?? src.length, 'expected a quoted string');
    pos++;
    return t.text;
  };

  const predicate = (): Filter => {
    const t = peek();
    if (isWord(t, 'hasPrefix')) {
      pos++;
      expect('(');
      const k = dottedAttribute();
      expect(',');
      const prefix = str();
      expect(')');
      return (a) => attribute(a, k)?.startsWith(prefix) === true;
    }
    if (isWord(t, 'attributes') && tokens[pos + 1]?.text === ':') {
      pos += 2;
      const k = attributeName();
      return (a) => Object.hasOwn(a, k);
    }
    if (t?.kind !== 'word' || !t.text.startsWith('attributes.')) {
      throw fail(src, t?.at ?? src.length, 'expected attributes:KEY, attributes.KEY or hasPrefix(...)');
    }
    const k = dottedAttribute();
    const op = peek();
    if (op?.text !== '=' && op?.text !== '!=') throw fail(src, op?.at ?? src.length, 'expected = or !=');
    pos++;
    const v = str();
    return op.text === '=' ? (a) => attribute(a, k) === v : (a) => attribute(a, k) !== v;
  };
  const factor = (): Filter => {
    const t = peek();
    if (isWord(t, 'NOT') || t?.text === '-') {
      pos++;
      const inner = factor();
      return (a) => !inner(a);
    }
    if (t?.text === '(') {
      pos++;
      const inner = expr();
      expect(')');
      return inner;
    }
    return predicate();
  };
  /** Factors joined by AND, and the first AND (a term with one is refused beside an OR). */
  const term = (): { filter: Filter; and?: Token } => {
    let left = factor();
    let and: Token | undefined;
    while (isWord(peek(), 'AND')) {
      and ??= peek();
      pos++;
      const l = left;
      const r = factor();
      left = (a) => l(a) && r(a);
    }
    return { filter: left, and };
  };
  const expr = (): Filter => {
    const first = term();
    let left = first.filter;
    while (isWord(peek(), 'OR')) {
      const or = peek()!;
      pos++;
      const next = term();
      const and = first.and ?? next.and;
      if (and && !stored)
        throw fail(
          src,
          first.and ? or.at : and.at,
          'AND and OR cannot be combined without parentheses: group them, as in "(attributes:a AND attributes:b) OR attributes:c"',
        );
      const l = left;
      const r = next.filter;
      left = (a) => l(a) || r(a);
    }
    return left;
  };
  const result = expr();
  if (!atEnd()) throw fail(src, peek()!.at, `unexpected "${peek()!.text}"`);
  return result;
}
