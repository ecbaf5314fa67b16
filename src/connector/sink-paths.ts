import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { projectOf, shortId } from '../core/names.js';

/** Encoded segments longer than this are shortened (file systems cap a name at 255 bytes). */
const MAX_SEGMENT = 200;

/**
 * A name as one path segment, injectively: every byte outside `[A-Za-z0-9._-]` becomes `%XX` (`%` itself
 * too), so `orders+x`, `orders%2Bx` and `orders_x` stay three folders. A name of dots only is encoded
 * whole (never `.` or `..`). A segment too long for a file name keeps a readable start and ends in
 * `~<hash of the name>`; a raw `~` never appears in an encoded name, so the two forms cannot meet.
 */
export function pathSegment(name: string): string {
  let encoded = '';
  for (const byte of Buffer.from(name, 'utf8')) {
    const c = String.fromCharCode(byte);
    encoded += /[A-Za-z0-9._-]/.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  if (/^\.*$/.test(encoded)) encoded = encoded.replaceAll('.', '%2E');
  if (encoded.length <= MAX_SEGMENT) return encoded;
  return `${encoded.slice(0, MAX_SEGMENT - 33)}~${createHash('sha256').update(name).digest('hex').slice(0, 32)}`;
}

/**
 * A subscription's own folder under a connector's root: `<root>/<project>/<subscription id>/<uid>`. The
 * names make it readable; the uid (random, new for a subscription created again under the same name)
 * keeps an earlier subscription's state from ever being taken for this one's.
 */
export function subscriptionDir(root: string, subscription: { name: string; uid: string }): string {
  return join(root, pathSegment(projectOf(subscription.name)), pathSegment(shortId(subscription.name)), pathSegment(subscription.uid));
}
