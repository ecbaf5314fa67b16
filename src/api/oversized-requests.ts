import * as grpc from '@grpc/grpc-js';
import { LIMITS } from '../core/limits.js';

/** How grpc-js words its refusal of a request message over `grpc.max_receive_message_length` (plain or decompressed). */
const GRPC_TOO_LARGE = /^Received message (larger than max|that decompresses to a size larger than)/;

/**
 * Answers a request message over the endpoint's gRPC limit as Pub/Sub answers an oversized request:
 * INVALID_ARGUMENT, naming the limit. grpc-js refuses it itself, before any handler, with
 * RESOURCE_EXHAUSTED, which Google's clients retry on Publish: a 25 MB publish was sent again and again
 * for 60 s and then failed with DEADLINE_EXCEEDED, saying nothing about its size.
 *
 * grpc-js sends that status from the call under every interceptor, so no interceptor's responder sees
 * it: this one must come first, and replaces that call's sendStatus (test/api/bad-input.test.ts checks
 * the answer, so an upgrade of grpc-js that routes it elsewhere is seen).
 */
export function oversizedRequestInterceptor(maxBytes: number): grpc.ServerInterceptor {
  return (_method, call) => {
    const send = call.sendStatus.bind(call);
    call.sendStatus = (status) =>
      send(
        status.code === grpc.status.RESOURCE_EXHAUSTED && GRPC_TOO_LARGE.test(status.details ?? '')
          ? {
              code: grpc.status.INVALID_ARGUMENT,
              details:
                `request payload size exceeds the limit: a gRPC request here is at most ${maxBytes} bytes ` +
                `(${status.details}); a publish request holds at most ${LIMITS.maxBatchBytes} bytes of messages, ` +
                `a message at most ${LIMITS.maxDataBytes} bytes of data`,
              metadata: status.metadata ?? new grpc.Metadata(),
            }
          : status,
      );
    return new grpc.ServerInterceptingCall(call);
  };
}
