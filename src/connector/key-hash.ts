/**
 * FNV-1a (32 bits) over a string's UTF-16 code units: a fast, stable spread of ordering keys (over a
 * writer's shards, a subscription's consumers). The same key always gives the same number, in every
 * process and version. Not for anything that needs resistance to chosen inputs.
 */
export function keyHash(text: string): number {
  let h = 2166136261;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619);
  return h >>> 0;
}
