import { projectOf, shortId } from '../core/names.js';

/**
 * The `orderly query` view name of each subscription, one name per subscription and never one name for
 * two (DuckDB compares names ignoring case):
 * - a subscription of the job's project is its id with `-` as `_` (`orders-to-files` -> `orders_to_files`),
 *   unless another subscription of the project would get that name too (`a-b` and `a_b`; `Orders` and
 *   `orders`), or a table or view of the database has it (`taken`: a view in front of it would hide it,
 *   also from `main.<name>`, as temporary views live in a schema called main too);
 * - those, and every other project's subscriptions, are their full name with each character outside
 *   `a-z 0-9 / . _ ~ + -` written `%XX` (`projects/p/subscriptions/a-b`, `projects/other/subscriptions/%4Frders`).
 * The two forms cannot meet: only the second holds a `/`.
 */
export function queryViewNames(subscriptions: string[], projectId: string, taken: Iterable<string> = []): Map<string, string> {
  const short = new Map(subscriptions.filter((s) => projectOf(s) === projectId).map((s) => [s, shortId(s).replaceAll('-', '_')]));
  const uses = new Map<string, number>();
  for (const name of [...short.values(), ...taken]) uses.set(name.toLowerCase(), (uses.get(name.toLowerCase()) ?? 0) + 1);
  return new Map(
    subscriptions.map((s) => {
      const name = short.get(s);
      return [s, name !== undefined && uses.get(name.toLowerCase()) === 1 ? name : escapeFullName(s)];
    }),
  );
}

function escapeFullName(name: string): string {
  let escaped = '';
  for (const byte of Buffer.from(name, 'utf8')) {
    const c = String.fromCharCode(byte);
    escaped += /[a-z0-9/._~+-]/.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return escaped;
}
