import { InvalidArgumentError } from '../core/errors.js';
import { checkProject } from '../core/names.js';
import { pageOf, type PageRequest } from '../core/paging.js';
import type { ProtoObject } from './pubsub-messages.js';

/** The call a request came in on, as a handler sees it. */
export interface RpcCall {
  /**
   * Aborts once nobody waits for the answer any more: the client cancelled the call or went away, or
   * (gRPC) its deadline passed, which grpc-js answers with DEADLINE_EXCEEDED itself.
   */
  readonly signal: AbortSignal;
  /**
   * `undo` runs if the answer is not written after all, because by then the call is gone (cancelled,
   * closed, or past its deadline): what the handler did for the answer alone can be taken back.
   */
  unsent(undo: () => void): void;
}

/**
 * The RpcCall a transport hands a handler, and what it runs when it does not write the answer after all.
 * `signal` is called the first time the handler reads its signal: most never do (only Pull waits).
 */
export function rpcCall(signal: () => AbortSignal): { call: RpcCall; unanswered: () => void } {
  const undos: (() => void)[] = [];
  return {
    call: {
      get signal() {
        return signal();
      },
      unsent: (undo) => undos.push(undo),
    },
    unanswered: () => {
      for (const undo of undos) undo();
    },
  };
}

/**
 * One unary RPC of the Pub/Sub API: takes the request as proto-loader decodes it (gRPC) or proto-json
 * decodes it (REST) and returns the response message in the same shape (or nothing, for Empty). Both
 * transports call the same handler.
 */
export type RpcHandler = (request: ProtoObject, call: RpcCall) => Promise<ProtoObject | void>;

/** Handlers by method name as the proto spells it (`CreateTopic`), per service (`google.pubsub.v1.Publisher`). */
export type ServiceHandlers = Record<string, Record<string, RpcHandler>>;

/**
 * A service's handlers, each typed by its request (`Requests` maps a method to its request message,
 * pubsub-messages.ts), as the map both transports call. This is where the decoding is trusted: gRPC
 * (proto-loader) and REST (fromProtoJson) both decode a request against the method's input type with
 * MESSAGE_SHAPE, so by the time it reaches its handler it has the shape `Requests` describes.
 */
export function serviceHandlers<Requests>(handlers: {
  [Method in keyof Requests]: (request: Requests[Method], call: RpcCall) => Promise<ProtoObject | void>;
}): Record<string, RpcHandler> {
  return handlers as unknown as Record<string, RpcHandler>;
}

/** A message field the request must carry (proto3 decodes an absent one as null). */
export function required<T>(value: T | null | undefined, field: string): T {
  if (value === null || value === undefined) throw new InvalidArgumentError(field, 'is required');
  return value;
}

/**
 * One page of a List call's items (sorted by `keyOf`), as `{ [field]: items, nextPageToken }`; `of` is
 * the resource the list is in (`projects/p`, a topic's full name), so a token works only for its own list.
 */
export function listPage<T>(
  request: PageRequest,
  items: readonly T[],
  keyOf: (item: T) => string,
  field: string,
  of: string,
  map: (item: T) => unknown = (x) => x,
): ProtoObject {
  const list = `${field} of ${of}`;
  const page = pageOf(items, { pageSize: request.pageSize, pageToken: request.pageToken }, keyOf, 'ascending', list);
  return { [field]: page.items.map(map), nextPageToken: page.nextPageToken };
}

/** The project id of `projects/{project}` (List calls name their parent so). */
export function projectId(parent: unknown, field = 'project'): string {
  const m = typeof parent === 'string' ? /^projects\/([^/]+)$/.exec(parent) : null;
  if (!m) throw new InvalidArgumentError(field, `expected projects/{project}, got ${JSON.stringify(parent) ?? String(parent)}`);
  checkProject(m[1]!, field);
  return m[1]!;
}
