import { InvalidArgumentError } from './errors.js';

/**
 * List paging as Google's APIs do it (`pageSize`, `pageToken`, `nextPageToken`): a page size of 0 or
 * none means the default, larger sizes are capped, and `nextPageToken` is empty on the last page. The
 * token holds the key of the last item returned (keyset paging), so items created or deleted between two
 * calls neither repeat nor skip the items that stay.
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

/** One page of `items`, which must be sorted by `keyOf` in `order`. */
export function pageOf<T>(
  items: readonly T[],
  request: PageRequest,
  keyOf: (item: T) => string,
  order: 'ascending' | 'descending',
): Page<T> {
  const size = pageSize(request.pageSize);
  let start = 0;
  if (request.pageToken) {
    const after = decodeToken(request.pageToken);
    const beyond = (key: string) => (order === 'ascending' ? key > after : key < after);
    start = items.findIndex((item) => beyond(keyOf(item)));
    if (start < 0) start = items.length;
  }
  const page = items.slice(start, start + size);
  const more = start + size < items.length;
  return { items: page, nextPageToken: more ? encodeToken(keyOf(page[page.length - 1]!)) : '' };
}

function pageSize(requested: number | undefined): number {
  if (requested === undefined || requested === 0) return DEFAULT_PAGE_SIZE;
  if (!Number.isInteger(requested) || requested < 0)
    throw new InvalidArgumentError('pageSize', `must be a non-negative integer, got ${requested}`);
  return Math.min(requested, MAX_PAGE_SIZE);
}

const TOKEN_PREFIX = 'k:';

function encodeToken(key: string): string {
  return Buffer.from(TOKEN_PREFIX + key).toString('base64url');
}

function decodeToken(token: string): string {
  const text = /^[A-Za-z0-9_-]+$/.test(token) ? Buffer.from(token, 'base64url').toString('utf8') : '';
  if (!text.startsWith(TOKEN_PREFIX)) throw new InvalidArgumentError('pageToken', 'not a page token from an earlier response of this list');
  return text.slice(TOKEN_PREFIX.length);
}
