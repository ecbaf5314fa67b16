import { InvalidArgumentError } from '../core/errors.js';

/** Per field name (`*` for every field): the whole value, or a selection inside it. */
type Selection = Map<string, Selection | 'whole'>;

/**
 * The `fields` system parameter of Google's JSON APIs (partial responses): `a,b/c,d(e,f)`, `*` for every
 * field, names as the JSON answer spells them (a proto name, `ack_ids`, means its JSON name). Parsed before
 * the method runs, so a bad one refuses the request instead of answering a done change with an error.
 * Hand-written: the syntax is a few lines and no library parses it.
 */
export function parseFieldSelector(text: string): Selection | undefined {
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
  const selection = (): Selection => {
    const selected: Selection = new Map();
    for (;;) {
      const path = [name()];
      while (text[at] === '/') {
        at++;
        path.push(name());
      }
      skipSpaces();
      let inner: Selection | 'whole' = 'whole';
      if (text[at] === '(') {
        at++;
        inner = selection();
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
  const selected = selection();
  if (at < text.length) throw fail(`unexpected "${text[at]}"`);
  return selected;
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
