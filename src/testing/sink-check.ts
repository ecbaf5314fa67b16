/** A message the suite published: its id and ordering key ('' for none). */
export interface PublishedMessage {
  /** The message id the publish returned. */
  id: string;
  /** Its ordering key; '' for none. */
  key: string;
}

const EXAMPLES = 3;

/**
 * What is wrong with what a sink holds (`held`: message ids in the sink's order), given what was
 * published (in publish order): messages lost, messages that were never published, a key whose messages
 * first appear out of publish order, and — for a connector that says it skips what it already wrote —
 * messages held more than once. Empty when the sink is right.
 */
export function sinkProblems(published: PublishedMessage[], held: string[], skipsDuplicates: boolean): string[] {
  const problems: string[] = [];
  const keyOf = new Map(published.map((m) => [m.id, m.key]));
  const count = new Map<string, number>();
  for (const id of held) count.set(id, (count.get(id) ?? 0) + 1);
  const report = (what: string, items: string[]) => {
    if (items.length) problems.push(`${items.length} ${what}, e.g. ${items.slice(0, EXAMPLES).join(', ')}`);
  };
  report(
    'published messages are not in the sink',
    published.filter((m) => !count.has(m.id)).map((m) => m.id),
  );
  report(
    'messages in the sink were never published',
    [...count.keys()].filter((id) => !keyOf.has(id)),
  );
  if (skipsDuplicates)
    report(
      'messages are in the sink more than once (the connector says it skips duplicates)',
      [...count].filter(([, n]) => n > 1).map(([id, n]) => `${id} (${n}x)`),
    );
  // Per key, each message's first copy must come after the first copy of the message before it.
  const firstSeen = new Map<string, number>();
  held.forEach((id, i) => firstSeen.has(id) || firstSeen.set(id, i));
  const byKey = new Map<string, string[]>();
  for (const m of published) if (m.key) byKey.set(m.key, [...(byKey.get(m.key) ?? []), m.id]);
  const disordered: string[] = [];
  for (const [key, ids] of byKey) {
    let previous: { id: string; at: number } | undefined;
    for (const id of ids) {
      const at = firstSeen.get(id);
      if (at === undefined) continue;
      if (previous && at < previous.at) {
        disordered.push(`key ${key} (${id} before ${previous.id}, published after it)`);
        break;
      }
      previous = { id, at };
    }
  }
  report('ordering keys are out of publish order in the sink', disordered);
  return problems;
}
