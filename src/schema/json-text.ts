/**
 * A strict JSON (RFC 8259) reader for schema definitions and JSON-encoded messages. `JSON.parse` cannot
 * be used there: it rounds integers past 2^53 (an Avro `long` or a protobuf `int64` would arrive silently
 * changed), keeps the last of duplicate keys (one of two values silently dropped), and Node 20's errors
 * carry no position. Here an integer literal outside the safe range becomes a `bigint`, a duplicate key
 * is an error, and every error names its line and column.
 */
export type JsonValue = null | boolean | number | bigint | NumberText | string | JsonValue[] | JsonObject;

/**
 * A number literal with a fraction or an exponent that a double would change (`12345678901234567.89`
 * reads as 12345678901234568): its text, as written. Only `parseJsonText(text, { exactNumbers: true })`
 * gives these, for readers that write decimals exactly (a DECIMAL column).
 */
export class NumberText {
  constructor(readonly text: string) {}
}
export interface JsonObject {
  [key: string]: JsonValue;
}

export class JsonTextError extends Error {
  constructor(
    readonly line: number,
    readonly column: number,
    readonly reason: string,
  ) {
    super(`${reason} at line ${line}, column ${column}`);
    this.name = 'JsonTextError';
  }
}

/** Nesting beyond this is refused rather than risking a stack overflow on hostile input. */
const MAX_DEPTH = 512;

export function parseJsonText(text: string, options: { exactNumbers?: boolean } = {}): JsonValue {
  const reader = new Reader(text, options.exactNumbers ?? false);
  reader.skipSpace();
  const value = reader.value(0);
  reader.skipSpace();
  if (reader.pos < text.length) reader.fail(`unexpected ${reader.describe()} after the JSON value`);
  return value;
}

/**
 * JSON text of plain data that may hold bigints (a schema's `long` default past 2^53, as parseJsonText
 * reads it): each written as its exact integer, where JSON.stringify throws. Otherwise as JSON.stringify
 * writes it (undefined members left out, undefined in an array as null, toJSON honoured).
 */
export function jsonText(value: unknown): string {
  if (typeof value === 'bigint') return value.toString();
  if (value !== null && typeof value === 'object' && typeof (value as { toJSON?: unknown }).toJSON === 'function')
    return jsonText((value as { toJSON(): unknown }).toJSON());
  if (Array.isArray(value)) return `[${value.map((v: unknown) => (v === undefined ? 'null' : jsonText(v))).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const members = Object.entries(value).filter(([, v]) => v !== undefined);
    return `{${members.map(([k, v]) => `${JSON.stringify(k)}:${jsonText(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** A NumberText is an object to JavaScript, not to JSON: taken for one, `1.00000000000000000001` read as a STRUCT of NULLs. */
export function isJsonObject(value: JsonValue | undefined): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof NumberText);
}

/** Short rendering of a value for error messages. */
export function describeJson(value: JsonValue | undefined): string {
  if (value === undefined) return 'nothing';
  const text = JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? Number(v) : v));
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

const NUMBER = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y;
/** A decimal number written in a JSON string (`"2.5e3"`, `".5"`): no hexadecimal, binary, `Infinity` or blanks. */
export const DECIMAL_TEXT = /^-?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;
const ESCAPES: Record<string, string> = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };

class Reader {
  pos = 0;

  constructor(
    private readonly text: string,
    private readonly exactNumbers: boolean,
  ) {}

  value(depth: number): JsonValue {
    if (depth > MAX_DEPTH) this.fail(`nesting deeper than ${MAX_DEPTH} levels`);
    const c = this.text[this.pos];
    if (c === '{') return this.object(depth);
    if (c === '[') return this.array(depth);
    if (c === '"') return this.string();
    if (c === '-' || (c !== undefined && c >= '0' && c <= '9')) return this.number();
    for (const [word, value] of [
      ['true', true],
      ['false', false],
      ['null', null],
    ] as const) {
      if (this.text.startsWith(word, this.pos)) {
        this.pos += word.length;
        return value;
      }
    }
    return this.fail(`unexpected ${this.describe()}`);
  }

  private object(depth: number): JsonObject {
    // A null prototype: a key such as "__proto__" is then an ordinary key, not a prototype change.
    const result = Object.create(null) as JsonObject;
    this.pos++;
    this.skipSpace();
    if (this.text[this.pos] === '}') {
      this.pos++;
      return result;
    }
    for (;;) {
      if (this.text[this.pos] !== '"') this.fail(`expected a "quoted" object key, got ${this.describe()}`);
      const keyAt = this.pos;
      const key = this.string();
      if (Object.prototype.hasOwnProperty.call(result, key)) {
        this.pos = keyAt;
        this.fail(`duplicate key ${JSON.stringify(key)}`);
      }
      this.skipSpace();
      this.expect(':');
      this.skipSpace();
      result[key] = this.value(depth + 1);
      this.skipSpace();
      if (this.text[this.pos] === ',') {
        this.pos++;
        this.skipSpace();
        continue;
      }
      this.expect('}');
      return result;
    }
  }

  private array(depth: number): JsonValue[] {
    const result: JsonValue[] = [];
    this.pos++;
    this.skipSpace();
    if (this.text[this.pos] === ']') {
      this.pos++;
      return result;
    }
    for (;;) {
      result.push(this.value(depth + 1));
      this.skipSpace();
      if (this.text[this.pos] === ',') {
        this.pos++;
        this.skipSpace();
        continue;
      }
      this.expect(']');
      return result;
    }
  }

  private string(): string {
    this.pos++;
    let out = '';
    let start = this.pos;
    for (;;) {
      const c = this.text[this.pos];
      if (c === undefined) this.fail('unterminated string');
      if (c === '"') {
        out += this.text.slice(start, this.pos);
        this.pos++;
        return out;
      }
      if (c < ' ') this.fail(`unescaped control character U+${c.charCodeAt(0).toString(16).padStart(4, '0')} in a string`);
      if (c !== '\\') {
        this.pos++;
        continue;
      }
      out += this.text.slice(start, this.pos);
      const e = this.text[this.pos + 1];
      if (e === 'u') {
        const unit = this.escapedUnit();
        // Half of a surrogate pair alone is no character (it would be stored as U+FFFD): refused.
        if (unit >= 0xdc00 && unit <= 0xdfff) this.fail('a lone low surrogate escape (\\udc00-\\udfff) is not a character');
        out += String.fromCharCode(unit);
        if (unit >= 0xd800 && unit <= 0xdbff) {
          const low = this.text.startsWith('\\u', this.pos) ? this.escapedUnit() : -1;
          if (low < 0xdc00 || low > 0xdfff) this.fail('a high surrogate escape (\\ud800-\\udbff) must be followed by a low one');
          out += String.fromCharCode(low);
        }
      } else if (e !== undefined && ESCAPES[e] !== undefined) {
        out += ESCAPES[e];
        this.pos += 2;
      } else {
        this.fail(`invalid escape \\${e ?? ''}`);
      }
      start = this.pos;
    }
  }

  /** The UTF-16 unit of the `\\uXXXX` escape at the position, which it moves past. */
  private escapedUnit(): number {
    const hex = this.text.slice(this.pos + 2, this.pos + 6);
    if (!/^[0-9a-fA-F]{4}$/.test(hex)) this.fail('invalid \\u escape (four hexadecimal digits expected)');
    this.pos += 6;
    return parseInt(hex, 16);
  }

  private number(): number | bigint | NumberText {
    NUMBER.lastIndex = this.pos;
    const m = NUMBER.exec(this.text);
    if (!m) return this.fail(`invalid number ${this.describe()}`);
    this.pos += m[0].length;
    const n = Number(m[0]);
    if (!m[1] && !m[2] && !Number.isSafeInteger(n)) return BigInt(m[0]);
    if (!Number.isFinite(n)) this.fail(`number ${m[0]} is out of range`);
    if (this.exactNumbers && canonicalDecimal(m[0]) !== canonicalDecimal(String(n))) return new NumberText(m[0]);
    return n;
  }

  private expect(c: string): void {
    if (this.text[this.pos] !== c) this.fail(`expected '${c}', got ${this.describe()}`);
    this.pos++;
  }

  skipSpace(): void {
    while (this.pos < this.text.length && ' \t\n\r'.includes(this.text[this.pos]!)) this.pos++;
  }

  describe(): string {
    if (this.pos >= this.text.length) return 'end of text';
    return JSON.stringify(this.text.slice(this.pos, this.pos + 12));
  }

  fail(reason: string): never {
    let line = 1;
    let lineStart = 0;
    for (let i = 0; i < this.pos; i++) {
      if (this.text[i] === '\n') {
        line++;
        lineStart = i + 1;
      }
    }
    throw new JsonTextError(line, this.pos - lineStart + 1, reason);
  }
}

/** A decimal literal's value as digits and exponent, without the zeros that do not change it: `1.50` and `15e-1` read alike. */
function canonicalDecimal(literal: string): string {
  const m = /^(-?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/.exec(literal)!;
  const fraction = m[3] ?? '';
  let digits = (m[2]! + fraction).replace(/^0+/, '');
  let exponent = Number(m[4] ?? 0) - fraction.length;
  if (!digits) return '0';
  const kept = digits.replace(/0+$/, '');
  exponent += digits.length - kept.length;
  digits = kept;
  return `${m[1]}${digits}e${exponent}`;
}
