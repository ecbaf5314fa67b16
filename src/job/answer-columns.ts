/**
 * The keys of an answer's row objects, one per column and never one for two. @duckdb/node-api names a
 * repeated column `name:1`, which a column really called `a:1` overwrote (`SELECT 1 a, 2 a, 3 "a:1"`
 * answered a: 1, a:1: 3), and sets keys on plain objects, where a column called `__proto__` vanished.
 * Here a repeat takes the first `name:n` no column holds, and rows are objects without a prototype.
 */
export function answerColumns(names: string[]): string[] {
  const taken = new Set(names);
  const seen = new Set<string>();
  return names.map((name) => {
    if (!seen.has(name)) {
      seen.add(name);
      return name;
    }
    let n = 1;
    while (taken.has(`${name}:${n}`)) n++;
    const key = `${name}:${n}`;
    taken.add(key);
    return key;
  });
}

/** Row objects of an answer's rows (arrays in column order), keyed by answerColumns. */
export function answerRows<T>(keys: string[], rows: T[][]): Record<string, T>[] {
  return rows.map((row) => {
    const object: Record<string, T> = Object.create(null) as Record<string, T>;
    keys.forEach((key, i) => (object[key] = row[i]!));
    return object;
  });
}
