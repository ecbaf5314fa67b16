import * as grpc from '@grpc/grpc-js';
import { createServer as createHttpServer, STATUS_CODES } from 'node:http';
import { createServer, type AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import type { PubSubCore } from '../core/pubsub-core.js';
import type { Logger } from '../log.js';
import {
  DEFAULT_IDLE_TIMEOUT_SECONDS,
  MAX_CONNECTIONS,
  MAX_GRPC_MESSAGE,
  MAX_STREAMS_PER_CONNECTION,
  REST_REQUEST_TIMEOUT_MS,
} from './endpoint-limits.js';
import { bearerCheck, bearerInterceptor } from './bearer-auth.js';
import { checkExposure, isLoopback } from './exposure.js';
import { pubsubServices } from './grpc-server.js';
import { oversizedRequestInterceptor } from './oversized-requests.js';
import { restHandler } from './rest-handler.js';
import { RestRequests } from './rest-requests.js';

const HTTP2_PREFACE = 'PRI * HTTP/2.0';
/** How long a stopping endpoint lets unary calls and REST requests in flight finish before it cuts them. */
const SHUTDOWN_GRACE_MS = 2_000;

export interface EndpointOptions {
  host: string;
  port: number;
  /** Every gRPC call and REST request must carry `authorization: Bearer <authToken>`. */
  authToken?: string;
  /** Binding anything but loopback is refused unless this is set (and a token is given). */
  allowRemote?: boolean;
  /**
   * A connection that does nothing this long is closed: silent before its first bytes, with an
   * unfinished HTTP request head, idle between HTTP requests, not reading a REST answer, or with no gRPC
   * call running.
   */
  idleTimeoutSeconds?: number;
  /** Connections open at once; more are refused (default MAX_CONNECTIONS). */
  maxConnections?: number;
  /** How the settings are spelled where the user gave them, for error messages. */
  flags?: { allowRemote: string; authToken: string };
  logger?: Logger;
}

/**
 * gRPC and REST on one port, as Google's emulator serves them: each connection's first bytes tell an
 * HTTP/2 (gRPC) client from an HTTP/1.1 (REST) one. Binds 127.0.0.1 unless told otherwise; off loopback
 * only with an explicit opt-in and a bearer token.
 */
export async function startPubsubEndpoint(core: PubSubCore, options: EndpointOptions): Promise<{ port: number; close(): Promise<void> }> {
  const { host, port, authToken, logger } = options;
  checkExposure(options, options.flags ?? { allowRemote: 'allowRemote', authToken: 'authToken' });
  const idleMs = (options.idleTimeoutSeconds ?? DEFAULT_IDLE_TIMEOUT_SECONDS) * 1000;
  const check = authToken === undefined ? undefined : bearerCheck(authToken);
  const { server: grpcServer, endStreams } = pubsubServices(
    core,
    {
      'grpc.max_receive_message_length': MAX_GRPC_MESSAGE,
      'grpc.max_concurrent_streams': MAX_STREAMS_PER_CONNECTION,
      'grpc.max_connection_idle_ms': idleMs,
      // Dead peers under a long StreamingPull are found by pings, not left open forever.
      'grpc.keepalive_time_ms': 60_000,
      'grpc.keepalive_timeout_ms': 20_000,
      // The oversized-request one first: it must wrap the call grpc-js refuses such a request on.
      interceptors: [oversizedRequestInterceptor(MAX_GRPC_MESSAGE), ...(check ? [bearerInterceptor(check)] : [])],
    },
    logger,
  );
  const injector = grpcServer.createConnectionInjector(grpc.ServerCredentials.createInsecure());
  const rest = new RestRequests(restHandler(core, { authorization: check, idleTimeoutMs: idleMs, logger }));
  const http = createHttpServer(
    {
      requestTimeout: REST_REQUEST_TIMEOUT_MS,
      headersTimeout: Math.min(idleMs, 60_000),
      keepAliveTimeout: idleMs,
      connectionsCheckingInterval: Math.min(idleMs / 2, 30_000),
    },
    rest.handle,
  );
  // Requests the HTTP parser refuses (or that time out before their head is complete) get Google's JSON
  // error body too, then the connection ends.
  http.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    if (!socket.writable || err.code === 'ECONNRESET') return void socket.destroy();
    const status = err.code === 'HPE_HEADER_OVERFLOW' ? 431 : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
    const message = status === 408 ? 'the request did not arrive in time' : `malformed HTTP request (${err.code ?? err.message})`;
    const body = JSON.stringify({ error: { code: status, message, status: 'INVALID_ARGUMENT' } });
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
  });
  // The HTTP server never listens itself (connections are handed to it), so start the tracking that
  // enforces headersTimeout and requestTimeout, which Node otherwise begins on 'listening'.
  http.emit('listening');
  const listener = createServer((socket) => {
    // A reset before the socket is handed over must not become an uncaught 'error' event.
    socket.on('error', () => socket.destroy());
    socket.setTimeout(idleMs, () => socket.destroy());
    socket.once('readable', () => {
      // No encoding is set on the socket, so a read gives a Buffer (or null when nothing is buffered).
      const head: unknown = socket.read(HTTP2_PREFACE.length) ?? socket.read();
      if (!Buffer.isBuffer(head)) return socket.destroy();
      socket.setTimeout(0);
      socket.unshift(head);
      if (head.toString('latin1').startsWith(HTTP2_PREFACE)) injector.injectConnection(socket);
      else http.emit('connection', socket);
    });
  });
  listener.maxConnections = options.maxConnections ?? MAX_CONNECTIONS;
  await new Promise<void>((resolve, reject) => {
    // Which setting: `run` binds the metrics port too.
    listener.once('error', (e: Error) =>
      reject(
        new Error(
          `the Pub/Sub endpoint cannot listen on ${host}:${port} (endpoint.host and endpoint.port, or serve's --host and --port): ${e.message}`,
          { cause: e },
        ),
      ),
    );
    listener.listen(port, host, resolve);
  });
  const bound = (listener.address() as AddressInfo).port;
  if (!isLoopback(host))
    logger?.warn({ host, port: bound }, 'the Pub/Sub endpoint is reachable from other machines; every call must carry the bearer token');
  return {
    port: bound,
    async close() {
      listener.close();
      http.closeIdleConnections();
      // Streaming pulls never end by themselves: they end now with UNAVAILABLE, which clients retry
      // (their messages stay leased until they expire and are delivered again). Unary calls and REST
      // requests in flight get a moment to finish (a publish is answered once stored: cut, its client
      // would publish it again), then the rest are cut.
      endStreams();
      const grpcDone = new Promise<void>((resolve) => grpcServer.tryShutdown(() => resolve()));
      let force: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.all([grpcDone, rest.stop()]),
        new Promise<void>((resolve) => (force = setTimeout(resolve, SHUTDOWN_GRACE_MS))),
      ]);
      clearTimeout(force);
      grpcServer.forceShutdown();
      http.closeAllConnections();
      http.close();
    },
  };
}
