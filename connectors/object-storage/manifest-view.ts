import type { ManifestObject } from './manifest.js';

/** One object of the view, and which of its records count. */
export interface ViewObject {
  entry: ManifestObject;
  /** Per record (file order): true when this record is the message's copy in the view. */
  counts: boolean[];
}

/** A fleet's objects seen as a whole: each message once. */
export interface ManifestView {
  /** Objects in view order: the one opened first first (the datetime in its name, then its name). */
  objects: ViewObject[];
  /** Distinct messages. */
  messages: number;
  /** Records that do not count: a copy of a message an earlier object (or earlier record) holds. */
  superseded: number;
}

/**
 * The manifest view of a fleet's objects (manifest entries with `messages`). Every copy a worker
 * committed stays in the bucket — Pub/Sub redelivered a key to another worker after a crash, or an ack was
 * lost — but the view holds each message once, decided by message id: the copy in the object opened
 * first (its `createdAt`, the datetime in its name; then the object name) counts, and within one object
 * the first record. Opening times never change once an object is named, so every reader, on every
 * machine, at any time, picks the same copy — also for an object committed late, by a worker that settled
 * another's unfinished upload.
 */
export function manifestView(entries: ManifestObject[]): ManifestView {
  const ordered = [...entries].sort((a, b) => compare(a.createdAt, b.createdAt) || compare(a.object, b.object));
  const seen = new Set<string>();
  let superseded = 0;
  const objects = ordered.map((entry) => {
    const counts = (entry.messages ?? []).map(([id]) => {
      if (seen.has(id)) {
        superseded++;
        return false;
      }
      seen.add(id);
      return true;
    });
    return { entry, counts };
  });
  return { objects, messages: seen.size, superseded };
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
