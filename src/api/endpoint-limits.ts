/** What one client may hold of the endpoint: connections, streams, body sizes, idle time. */

/** A connection that does nothing this long is closed (configurable: --idle-timeout, endpoint.idleTimeoutSeconds). */
export const DEFAULT_IDLE_TIMEOUT_SECONDS = 30;
/** Connections open at once; more are refused. */
export const MAX_CONNECTIONS = 1000;
/** Concurrent calls per HTTP/2 connection (Pub/Sub's own limit); Google's client opens 5 streams per subscriber. */
export const MAX_STREAMS_PER_CONNECTION = 100;
/** gRPC requests up to 20 MiB: a 10 MB publish plus envelope, as Pub/Sub accepts. */
export const MAX_GRPC_MESSAGE = 20 * 1024 * 1024;
/** REST bodies up to 14 MiB: a 10 MB publish in base64, plus envelope. */
export const MAX_REST_BODY = 14 * 1024 * 1024;
/** A REST request must arrive completely within this time. */
export const REST_REQUEST_TIMEOUT_MS = 60_000;
