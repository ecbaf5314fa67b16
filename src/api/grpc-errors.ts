import * as grpc from '@grpc/grpc-js';
import { OrderlyError, type StatusCode } from '../core/errors.js';
import type { Logger } from '../log.js';
import { noteStoreFull } from './store-full-log.js';
import { requestDecoder } from './request-decoding.js';
import { statusDetailsBin } from './status-details.js';

const GRPC_CODES: Record<StatusCode, grpc.status> = {
  INVALID_ARGUMENT: grpc.status.INVALID_ARGUMENT,
  NOT_FOUND: grpc.status.NOT_FOUND,
  ALREADY_EXISTS: grpc.status.ALREADY_EXISTS,
  FAILED_PRECONDITION: grpc.status.FAILED_PRECONDITION,
  RESOURCE_EXHAUSTED: grpc.status.RESOURCE_EXHAUSTED,
  ABORTED: grpc.status.ABORTED,
  INTERNAL: grpc.status.INTERNAL,
};

/** Characters of an error message a gRPC status carries (the rest is cut): see boundedDetails. */
const MAX_STATUS_DETAILS = 2048;

/**
 * An error message short enough for the trailers it travels in. Messages quote what was sent (an ack id,
 * a name), which may be megabytes long; trailers past the client's limit on header size (grpc-js gave up on 100 KB)
 * are dropped by the client, and the call then hangs until its deadline instead of failing.
 */
function boundedDetails(message: string): string {
  if (message.length <= MAX_STATUS_DETAILS) return message;
  let cut = MAX_STATUS_DETAILS - 64;
  // Never half of a surrogate pair (it has no UTF-8 form).
  if (/[\uD800-\uDBFF]/.test(message[cut - 1]!)) cut--;
  return `${message.slice(0, cut)}... (cut: ${message.length} characters in all)`;
}

/** What a call still open when the server stops ends with: UNAVAILABLE, which every Google client retries. */
export function shuttingDown(): grpc.StatusObject {
  return { code: grpc.status.UNAVAILABLE, details: 'the server is shutting down', metadata: new grpc.Metadata() };
}

/**
 * OrderlyErrors become Pub/Sub's status codes (with their ErrorInfo, if any, as status details). Anything
 * else is a defect in Orderly, not in the request: it is logged with its stack and answered INTERNAL.
 */
export function toStatus(e: unknown, logger: Logger | undefined, method: string): grpc.StatusObject {
  if (e instanceof OrderlyError) {
    noteStoreFull(e, logger, method);
    const metadata = new grpc.Metadata();
    const details = boundedDetails(e.message);
    if (e.errorInfo) metadata.set('grpc-status-details-bin', statusDetailsBin(GRPC_CODES[e.code], details, e.errorInfo));
    return { code: GRPC_CODES[e.code], details, metadata };
  }
  logger?.error({ err: e, method }, 'internal error in a gRPC call');
  return {
    code: grpc.status.INTERNAL,
    details: `Orderly internal error in ${method} (logged by the server)`,
    metadata: new grpc.Metadata(),
  };
}

/** What a request that protobuf cannot decode turns into, so the handler can answer INVALID_ARGUMENT. */
export class UndecodableRequest {
  constructor(readonly reason: string) {}

  error(method: string): OrderlyError {
    return new OrderlyError('INVALID_ARGUMENT', `${method}: the request is not a valid protobuf message (${this.reason})`);
  }
}

/**
 * grpc-js answers INTERNAL when a request fails to deserialize; a malformed request is the caller's
 * fault, so each method's deserializer (requestDecoder: strings must be UTF-8) hands an
 * `UndecodableRequest` to the handler instead of throwing.
 */
export function withUndecodableRequests(service: grpc.ServiceDefinition): grpc.ServiceDefinition {
  return Object.fromEntries(
    Object.entries(service).map(([name, method]) => {
      const decode = requestDecoder(method.path);
      return [
        name,
        {
          ...method,
          requestDeserialize: (bytes: Buffer): unknown => {
            try {
              return decode(bytes);
            } catch (e) {
              return new UndecodableRequest((e as Error).message);
            }
          },
        },
      ];
    }),
  );
}
