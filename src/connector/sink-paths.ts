import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { projectOf, shortId } from '../core/names.js';

/** Encoded segments longer than this are shortened (file systems cap a name at 255 bytes). */
const MAX_SEGMENT = 200;

/**
 * A name as one path segment, injectively: every byte outside `[A-Za-z0-9._-]` becomes `%XX` (`%` itself
 * too), so `orders+x`, `orders%2Bx` and `orders_x` stay three folders. A name of dots only is encoded
 * whole (never `.` or `..`). A segment too long for a file name, an empty name, and a name with a lone
 * surrogate (no UTF-8 form of its own) keep a readable start and end in `~<hash of the name>`; a raw `~`
 * never appears in an encoded name, so the two forms cannot meet.
 */
export function pathSegment(name: string): string {
  const bytes = Buffer.from(name, 'utf8');
  let encoded = '';
  for (const byte of bytes) {
    const c = String.fromCharCode(byte);
    encoded += /[A-Za-z0-9._-]/.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  if (/^\.*$/.test(encoded)) encoded = encoded.replaceAll('.', '%2E');
  if (encoded !== '' && encoded.length <= MAX_SEGMENT && bytes.toString('utf8') === name) return encoded;
  const hash = createHash('sha256').update(Buffer.from(name, 'utf16le')).digest('hex').slice(0, 32);
  return `${encoded.slice(0, MAX_SEGMENT - 33)}~${hash}`;
}

/**
 * A subscription's own folder under a connector's root: `<root>/<project>/<subscription id>/<uid>`. The
 * names make it readable; the uid (random, new for a subscription created again under the same name)
 * keeps an earlier subscription's state from ever being taken for this one's.
 */
export function subscriptionDir(root: string, subscription: { name: string; uid: string }): string {
  return join(root, pathSegment(projectOf(subscription.name)), pathSegment(shortId(subscription.name)), pathSegment(subscription.uid));
}
