import { isUtf8 } from 'node:buffer';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { gunzip } from 'node:zlib';
import { InvalidArgumentError, OrderlyError, type StatusCode } from '../core/errors.js';
import type { PubSubCore } from '../core/pubsub-core.js';
import type { Logger } from '../log.js';
import { noteStoreFull } from './store-full-log.js';
import { UNAUTHENTICATED_MESSAGE } from './bearer-auth.js';
import { MAX_REST_BODY } from './endpoint-limits.js';
import { parseFieldSelector, selectFields } from './partial-response.js';
import { toProtoJson } from './proto-json.js';
import { pubsubHandlers } from './pubsub-services.js';
import { pubsubRoot } from './pubsub-proto.js';
import { restRequest, restRoutes } from './rest-routes.js';
import { rpcCall } from './rpc.js';
import { systemParameter } from './system-parameters.js';
import { errorInfoJson } from './status-details.js';

const HTTP_STATUS: Record<StatusCode, number> = {
  INVALID_ARGUMENT: 400,
  FAILED_PRECONDITION: 400,
  NOT_FOUND: 404,
  ALREADY_EXISTS: 409,
  ABORTED: 409,
  RESOURCE_EXHAUSTED: 429,
  INTERNAL: 500,
};

/**
 * A request refused before its body was read: the connection is closed after the answer, unless the rest
 * of the body is read and dropped (see the error handler).
 */
class Refused extends Error {
  constructor(
    readonly httpStatus: number,
    readonly status: string,
    message: string,
    /** The body's reader goes on reading and dropping it (readRaw), up to MAX_DRAINED_BODY in all. */
    readonly draining = false,
  ) {
    super(message);
  }
}

export interface RestOptions {
  /** When set, every request's Authorization header must pass it. */
  authorization?: (header: string | undefined) => boolean;
  /** A connection whose client takes none of its answer for this long is closed (default: never). */
  idleTimeoutMs?: number;
  logger?: Logger;
}

/** `alt`: JSON with enums as numbers. */
const NUMERIC_ENUMS = 'json;enum-encoding=int';

/**
 * Pub/Sub's REST/JSON v1 API, as Google's emulator serves it beside gRPC: each route is a gRPC method
 * transcoded by its `google.api.http` annotation (rest-routes.ts), the body and query are decoded as
 * proto3 JSON into the method's request (proto-json.ts), and the same handler as gRPC answers, written
 * back as proto3 JSON. Errors use Google's JSON error body, a 4xx for anything wrong with the request.
 */
export function restHandler(core: PubSubCore, options: RestOptions = {}): (req: IncomingMessage, res: ServerResponse) => void {
  const routes = restRoutes(pubsubRoot());
  const handlers = pubsubHandlers(core);

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const { path, query } = splitUrl(req.url);
    // Google's JSON APIs take the token as the access_token system parameter too (for clients that cannot set headers).
    const accessToken = systemParameter('accessToken', query, req.headers);
    const credentials = req.headers.authorization ?? (accessToken === undefined ? undefined : `Bearer ${accessToken}`);
    if (options.authorization && !options.authorization(credentials)) throw new Refused(401, 'UNAUTHENTICATED', UNAUTHENTICATED_MESSAGE);
    const method = (req.method === 'POST' && systemParameter('httpMethod', query, req.headers)?.toUpperCase()) || req.method;
    const forPath = routes.filter((r) => r.pattern.test(path));
    const matched = forPath.find((r) => r.method === method);
    if (!matched) {
      const allowed = [...new Set(forPath.map((r) => r.method))].sort();
      throw new Refused(
        404,
        'NOT_FOUND',
        allowed.length ? `no method ${method} on ${path} (allowed: ${allowed.join(', ')})` : `no such path: ${path}`,
      );
    }
    const alt = systemParameter('alt', query, req.headers);
    // Google's clients over REST (google-gax's fallback) ask for every call's enums as numbers.
    if (alt !== undefined && alt !== 'json' && alt !== NUMERIC_ENUMS)
      throw new InvalidArgumentError('alt', `only "json" (or "${NUMERIC_ENUMS}") is served, got ${JSON.stringify(alt)}`);
    const fields = parseFieldSelector(systemParameter('fields', query, req.headers) ?? '', matched.responseType);
    const pretty = systemParameter('prettyPrint', query, req.headers);
    const body = await readBody(req);
    const request = restRequest(matched, matched.pattern.exec(path)!, body, query);
    const handler = handlers[matched.service]?.[matched.rpc];
    if (!handler) throw new Refused(501, 'UNIMPLEMENTED', `Orderly does not implement ${matched.service}.${matched.rpc} yet`);
    const signal = gone(res);
    const { call, unanswered } = rpcCall(() => signal);
    const answer = toProtoJson(matched.responseType, (await handler(request, call)) ?? {}, { numericEnums: alt === NUMERIC_ENUMS });
    // The connection may be destroyed already while its 'close' is still to come.
    if (signal.aborted || req.socket.destroyed) {
      unanswered();
      return;
    }
    const response = fields ? selectFields(answer, fields) : answer;
    res
      .writeHead(200, { 'content-type': 'application/json; charset=utf-8' })
      .end(pretty === 'true' ? JSON.stringify(response, null, 2) : JSON.stringify(response));
    // An answer the socket could not take whole (a pull's, up to ~12 MB of JSON) waits in memory for the
    // client to read it: one that never reads held it for good, and pulled again on more connections once
    // the leases expired. Node puts its own keep-alive timeout in place once the answer is sent.
    if (!res.writableFinished && options.idleTimeoutMs) req.socket.setTimeout(options.idleTimeoutMs);
  };

  return (req, res) => {
    handle(req, res).catch((e: unknown) => {
      let status: number;
      let code: string;
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (e instanceof Refused) {
        [status, code] = [e.httpStatus, e.status];
        // The rest of a body of a stated length Node reads and drops once the answer is out (its client, still
        // sending, would otherwise see its connection reset, EPIPE, and never read the answer); a longer, an
        // unstated or an unauthenticated one is not read: the connection ends instead.
        const drained = e.draining || (status !== 401 && Number(req.headers['content-length']) <= MAX_DRAINED_BODY);
        if (!req.complete && !drained) headers.connection = 'close';
        if (status === 401) headers['www-authenticate'] = 'Bearer';
      } else if (e instanceof OrderlyError) {
        noteStoreFull(e, options.logger, `${req.method} ${loggable(req.url)}`);
        [status, code] = [HTTP_STATUS[e.code], e.code];
      } else {
        options.logger?.error({ err: e, method: req.method, path: loggable(req.url) }, 'internal error in a REST request');
        [status, code] = [500, 'INTERNAL'];
      }
      const message = e instanceof OrderlyError || e instanceof Refused ? e.message : 'Orderly internal error (logged by the server)';
      if (res.headersSent) return void res.destroy();
      const details = e instanceof OrderlyError && e.errorInfo ? { details: [errorInfoJson(e.errorInfo)] } : {};
      res.writeHead(status, headers).end(JSON.stringify({ error: { code: status, message, status: code, ...details } }));
    });
  };
}

/** `http://host` before the path: the absolute form of a request target, which a server must accept as well (RFC 9112 §3.2.2). */
const ABSOLUTE_FORM = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/;

function splitUrl(target = ''): { path: string; query: URLSearchParams } {
  const url = target.replace(ABSOLUTE_FORM, '');
  const queryAt = url.indexOf('?');
  return { path: queryAt < 0 ? url : url.slice(0, queryAt), query: new URLSearchParams(queryAt < 0 ? '' : url.slice(queryAt + 1)) };
}

/** The request URL without the value of an access_token parameter: a token is never logged. */
function loggable(url: string | undefined): string {
  const { path, query } = splitUrl(url);
  if (!query.has('access_token')) return url ?? '';
  query.set('access_token', 'REDACTED');
  return `${path}?${query.toString()}`;
}

/** Aborts when the connection closes before the response was sent: the client went away. */
function gone(res: ServerResponse): AbortSignal {
  const controller = new AbortController();
  if (res.destroyed) controller.abort();
  else
    res.once('close', () => {
      if (!res.writableEnded) controller.abort();
    });
  return controller.signal;
}

/** A refused body of a stated length up to this is drained (see the error handler): 4 times what a request may have. */
const MAX_DRAINED_BODY = 4 * MAX_REST_BODY;

const tooLarge = (draining = false) => new Refused(413, 'INVALID_ARGUMENT', `request body over ${MAX_REST_BODY} bytes`, draining);

/**
 * The JSON body, or undefined when there is none; refuses more than MAX_REST_BODY bytes without reading
 * them. A gzip body (`content-encoding: gzip`, which Google's front ends take) is inflated to at most
 * MAX_REST_BODY bytes; another coding is refused before the body is read rather than parsed as if plain.
 */
async function readBody(req: IncomingMessage): Promise<unknown> {
  const gzipped = contentCoding(req.headers['content-encoding']) === 'gzip';
  if (Number(req.headers['content-length']) > MAX_REST_BODY) throw tooLarge();
  const raw = await readRaw(req);
  const body = gzipped && raw ? await inflate(raw) : raw;
  if (!body?.length) return undefined;
  // Decoded leniently, bytes that are not UTF-8 would reach names and attributes as U+FFFD.
  if (!isUtf8(body)) throw new InvalidArgumentError('request body', 'is not valid UTF-8');
  try {
    return JSON.parse(body.toString('utf8'));
  } catch (e) {
    throw new InvalidArgumentError('request body', `is not JSON: ${(e as Error).message.slice(0, 200)}`);
  }
}

/** `gzip`, or undefined for a plain body; anything else is 415. */
function contentCoding(header: string | undefined): 'gzip' | undefined {
  const codings = (header ?? '')
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '' && c !== 'identity');
  if (codings.length === 0) return undefined;
  if (codings.length === 1 && (codings[0] === 'gzip' || codings[0] === 'x-gzip')) return 'gzip';
  throw new Refused(415, 'INVALID_ARGUMENT', `content-encoding ${JSON.stringify(header)} is not served (gzip or none)`);
}

function inflate(body: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    gunzip(body, { maxOutputLength: MAX_REST_BODY }, (e, inflated) => {
      if (!e) resolve(inflated);
      else if ((e as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') reject(tooLarge());
      else reject(new InvalidArgumentError('request body', `is not valid gzip (content-encoding: gzip): ${e.message}`));
    }),
  );
}

/** The body's bytes as sent, or undefined when there are none. */
function readRaw(req: IncomingMessage): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (c: Buffer) => {
      size += c.length;
      if (size <= MAX_REST_BODY) return void chunks.push(c);
      if (size - c.length <= MAX_REST_BODY) {
        chunks.length = 0;
        reject(tooLarge(true));
      }
      // The rest of a body without a stated length is read and dropped, so the client, still sending,
      // reads its 413 and keeps the connection: closed under it, it was reset (ECONNRESET, EPIPE), which
      // can come before the client has read the answer. Past MAX_DRAINED_BODY the connection ends, as a
      // longer stated one is not read.
      if (size > MAX_DRAINED_BODY) req.destroy();
    };
    req.on('data', onData);
    req.once('error', reject);
    req.once('end', () => {
      if (size > MAX_REST_BODY) return;
      resolve(size ? Buffer.concat(chunks) : undefined);
    });
  });
}
