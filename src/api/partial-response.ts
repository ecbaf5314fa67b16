import protobuf from 'protobufjs';
import { InvalidArgumentError } from '../core/errors.js';
import { JSON_EXTENSIONS, isWellKnown } from './proto-json.js';

/** Per field name (`*` for every field): the whole value, or a selection inside it. */
type Selection = Map<string, Selection | 'whole'>;

/** Deeper than any answer of the API nests; the parser and the checks recurse once per level. */
const MAX_DEPTH = 32;

/**
 * The `fields` system parameter of Google's JSON APIs (partial responses): `a,b/c,d(e,f)`, `*` for every
 * field, names as the JSON answer spells them (a proto name, `ack_ids`, means its JSON name). Parsed and
 * checked against the answer's type before the method runs, so a bad one refuses the request instead of
 * answering a done change with an error; a field the answer does not have is refused, as Google refuses
 * it ("Invalid field selection"), rather than answered with nothing. Hand-written: the syntax is a few
 * lines and no library parses it.
 */
export function parseFieldSelector(text: string, type: protobuf.Type): Selection | undefined {
  if (text.trim() === '') return undefined;
  let at = 0;
  const fail = (detail: string) => new InvalidArgumentError('fields', `${detail} at position ${at} in ${JSON.stringify(text)}`);
  const skipSpaces = () => {
    while (text[at] === ' ') at++;
  };
  const name = (): string => {
    skipSpaces();
    const m = /^(\*|[A-Za-z_][A-Za-z0-9_]*)/.exec(text.slice(at));
    if (!m) throw fail('expected a field name');
    at += m[0].length;
    return m[0] === '*' ? '*' : m[0].replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
  };
  const selection = (depth: number): Selection => {
    const selected: Selection = new Map();
    for (;;) {
      const path = [name()];
      while (text[at] === '/') {
        at++;
        path.push(name());
      }
      if (depth + path.length > MAX_DEPTH) throw fail(`nests deeper than ${MAX_DEPTH} fields`);
      skipSpaces();
      let inner: Selection | 'whole' = 'whole';
      if (text[at] === '(') {
        at++;
        inner = selection(depth + path.length);
        if (text[at] !== ')') throw fail('expected ")"');
        at++;
        skipSpaces();
      }
      for (const field of path.slice(1).reverse()) inner = new Map([[field, inner]]);
      merge(selected, path[0]!, inner);
      if (text[at] !== ',') return selected;
      at++;
    }
  };
  const selected = selection(0);
  if (at < text.length) throw fail(`unexpected "${text[at]}"`);
  checkSelection(selected, type, '');
  return selected;
}

function checkSelection(selection: Selection, type: protobuf.Type, at: string): void {
  for (const [name, inner] of selection) {
    // `*` keeps every field, whatever is selected inside them.
    if (name === '*') continue;
    const path = at ? `${at}/${name}` : name;
    const field = Object.hasOwn(type.fields, name) ? type.fields[name] : undefined;
    if (!field) {
      // Orderly's extensions are plain JSON: anything may be selected inside them.
      if (JSON_EXTENSIONS[type.fullName.slice(1)]?.includes(name)) continue;
      throw invalidSelection(path, `${type.name} has no field ${name}`);
    }
    if (inner === 'whole') continue;
    if (!field.map) checkInside(field, inner, path);
    // A map's keys are its entries' names: any key may be selected, and inside it the value's fields.
    else for (const [key, value] of inner) if (value !== 'whole') checkInside(field, value, `${path}/${key}`);
  }
}

/** A selection inside one value of `field` (an element of a list, the value of a map entry). */
function checkInside(field: protobuf.Field, inner: Selection, path: string): void {
  const type = field.resolvedType;
  // A Struct is a JSON object of any keys.
  if (type instanceof protobuf.Type && type.fullName === '.google.protobuf.Struct') return;
  if (type instanceof protobuf.Type && !isWellKnown(type)) return checkSelection(inner, type, path);
  throw invalidSelection(`${path}/${[...inner.keys()][0]!}`, `${field.name} has no fields`);
}

function invalidSelection(path: string, why: string): InvalidArgumentError {
  return new InvalidArgumentError('fields', `invalid field selection ${path} (${why})`);
}

function merge(into: Selection, field: string, inner: Selection | 'whole'): void {
  const had = into.get(field);
  if (had === undefined || inner === 'whole') into.set(field, inner);
  else if (had !== 'whole') for (const [k, v] of inner) merge(had, k, v);
}

/** The parts of a JSON answer a selection names; a list is selected element by element. */
export function selectFields(value: unknown, selection: Selection): unknown {
  if (Array.isArray(value)) return value.map((v) => selectFields(v, selection));
  if (typeof value !== 'object' || value === null) return value;
  const source = value as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  const take = (field: string, inner: Selection | 'whole') => {
    out[field] = inner === 'whole' ? source[field] : selectFields(source[field], inner);
  };
  const every = selection.get('*');
  if (every !== undefined) for (const field of Object.keys(source)) take(field, every);
  for (const [field, inner] of selection) if (field !== '*' && Object.hasOwn(source, field)) take(field, inner);
  return out;
}
