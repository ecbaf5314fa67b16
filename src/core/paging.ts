import { InvalidArgumentError } from './errors.js';

/**
 * List paging as Google's APIs do it (`pageSize`, `pageToken`, `nextPageToken`): a page size of 0 or
 * none means the default, larger sizes are capped, and `nextPageToken` is empty on the last page. The
 * token holds the key of the last item returned (keyset paging), so items created or deleted between two
 * calls neither repeat nor skip the items that stay. It also names the list it came from (`topics of
 * projects/p`): given to another list (another project's, another kind's) it is refused, where its key
 * would silently have started that list somewhere else (an empty page, or the whole list again).
 */
export const DEFAULT_PAGE_SIZE = 100;
export const MAX_PAGE_SIZE = 1000;

export interface PageRequest {
  pageSize?: number;
  pageToken?: string;
}

export interface Page<T> {
  items: T[];
  nextPageToken: string;
}

/** One page of `items` of the list `list` names (`topics of projects/p`), which must be sorted by `keyOf` in `order`. */
export function pageOf<T>(
  items: readonly T[],
  request: PageRequest,
  keyOf: (item: T) => string,
  order: 'ascending' | 'descending',
  list: string,
): Page<T> {
  const size = pageSize(request.pageSize);
  let start = 0;
  if (request.pageToken) {
    const after = decodeToken(request.pageToken, list);
    const beyond = (key: string) => (order === 'ascending' ? key > after : key < after);
    start = items.findIndex((item) => beyond(keyOf(item)));
    if (start < 0) start = items.length;
  }
  const page = items.slice(start, start + size);
  const more = start + size < items.length;
  return { items: page, nextPageToken: more ? encodeToken(list, keyOf(page[page.length - 1]!)) : '' };
}

function pageSize(requested: number | undefined): number {
  if (requested === undefined || requested === 0) return DEFAULT_PAGE_SIZE;
  if (!Number.isInteger(requested) || requested < 0)
    throw new InvalidArgumentError('pageSize', `must be a non-negative integer, got ${requested}`);
  return Math.min(requested, MAX_PAGE_SIZE);
}

/** A token names its list and the key: `l:["topics of projects/p","projects/p/topics/t"]`. */
const TOKEN_PREFIX = 'l:';
/**
 * Tokens of Orderly before they named their list held the key alone; one a client got before an upgrade
 * still pages on, unchecked as it was then.
 */
const KEY_ONLY_PREFIX = 'k:';

function encodeToken(list: string, key: string): string {
  return Buffer.from(TOKEN_PREFIX + JSON.stringify([list, key])).toString('base64url');
}

function decodeToken(token: string, list: string): string {
  const text = /^[A-Za-z0-9_-]+$/.test(token) ? Buffer.from(token, 'base64url').toString('utf8') : '';
  if (text.startsWith(KEY_ONLY_PREFIX)) return text.slice(KEY_ONLY_PREFIX.length);
  let parsed: unknown;
  try {
    parsed = text.startsWith(TOKEN_PREFIX) ? JSON.parse(text.slice(TOKEN_PREFIX.length)) : undefined;
  } catch {
    parsed = undefined;
  }
  if (!Array.isArray(parsed) || parsed.length !== 2 || !parsed.every((p) => typeof p === 'string'))
    throw new InvalidArgumentError('pageToken', 'not a page token from an earlier response of this list');
  const [from, key] = parsed as [string, string];
  if (from !== list) throw new InvalidArgumentError('pageToken', `is a page token of another list (${from}), not of this one (${list})`);
  return key;
}
