import { InvalidArgumentError } from '../core/errors.js';
import { pageOf } from '../core/paging.js';
import type { ProtoObject } from './proto-json.js';

/**
 * One unary RPC of the Pub/Sub API: takes the request as proto-loader decodes it (gRPC) or proto-json
 * decodes it (REST) and returns the response message in the same shape (or nothing, for Empty). Both
 * transports call the same handler.
 */
export type RpcHandler = (request: ProtoObject) => Promise<ProtoObject | void>;

/** Handlers by method name as the proto spells it (`CreateTopic`), per service (`google.pubsub.v1.Publisher`). */
export type ServiceHandlers = Record<string, Record<string, RpcHandler>>;

/** A message field the request must carry (proto3 decodes an absent one as null). */
export function required<T>(value: T | null | undefined, field: string): T {
  if (value === null || value === undefined) throw new InvalidArgumentError(field, 'is required');
  return value;
}

/** One page of a List call's items (sorted by `keyOf`), as `{ [field]: items, nextPageToken }`. */
export function listPage<T>(request: ProtoObject, items: readonly T[], keyOf: (item: T) => string, field: string, map: (item: T) => unknown = (x) => x): ProtoObject {
  const page = pageOf(items, { pageSize: request.pageSize, pageToken: request.pageToken }, keyOf, 'ascending');
  return { [field]: page.items.map(map), nextPageToken: page.nextPageToken };
}

/** The project id of `projects/{project}` (List calls name their parent so). */
export function projectId(parent: unknown, field = 'project'): string {
  const m = typeof parent === 'string' ? /^projects\/([^/]+)$/.exec(parent) : null;
  if (!m) throw new InvalidArgumentError(field, `expected projects/{project}, got ${JSON.stringify(parent) ?? String(parent)}`);
  return m[1]!;
}
