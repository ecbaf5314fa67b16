import * as grpc from '@grpc/grpc-js';
import type { PubSubCore } from '../core/pubsub-core.js';
import type { Logger } from '../log.js';
import { shuttingDown, toStatus, UndecodableRequest, withUndecodableRequests } from './grpc-errors.js';
import { pubsubHandlers } from './pubsub-services.js';
import { loadPubsubProto } from './pubsub-proto.js';
import { rpcCall, type RpcHandler } from './rpc.js';
import { OpenStreams, streamingPull, withEncodedDeliveries, type StreamingPullRequest } from './streaming-pull.js';

/**
 * Unary handlers: OrderlyErrors become Pub/Sub's status codes; an undecodable request is INVALID_ARGUMENT.
 * With `waiting` (Pull, which waits for messages), a server about to stop answers the call UNAVAILABLE at
 * once, and the handler stops waiting with nothing leased.
 */
function unary(method: string, fn: RpcHandler, logger?: Logger, waiting?: OpenStreams): grpc.handleUnaryCall<unknown, unknown> {
  return (call, callback) => {
    const request: unknown = call.request;
    // grpc-js reports a call past its grpc-timeout as cancelled too, after answering DEADLINE_EXCEEDED. It
    // sets `call.cancelled` as it emits 'cancelled', so that flag says whether the call is gone; only a
    // handler that reads its signal (Pull, which waits) gets an AbortController and a listener, which every
    // Publish call built for nothing (1-2% of `orderly serve`'s main thread in a profile of the latency benchmark).
    let gone: AbortController | undefined;
    const abort = () => gone!.abort();
    const signal = () => {
      if (!gone) {
        gone = new AbortController();
        if (ended()) gone.abort();
        else call.once('cancelled', abort);
      }
      return gone.signal;
    };
    let shutDown = false;
    const ended = () => shutDown || call.cancelled;
    // grpc-js reports every call's closed stream as cancelled, answered or not: an abort after the answer
    // builds a DOMException (a stack trace) and dispatches an event for nobody, ~5% of `orderly serve`'s busy
    // CPU under Google's client publishing one message per call (a profile of the latency benchmark).
    const settled = () => {
      waiting?.streams.delete(goAway);
      if (gone) call.removeListener('cancelled', abort);
    };
    const deadline = call.getDeadline();
    const deadlineMs = deadline instanceof Date ? deadline.getTime() : deadline;
    const { call: rpc, unanswered } = rpcCall(signal);
    const goAway = () => {
      waiting?.streams.delete(goAway);
      if (ended()) return;
      shutDown = true;
      gone?.abort();
      callback(shuttingDown());
    };
    if (waiting?.closing) return goAway();
    waiting?.streams.add(goAway);
    const result =
      request instanceof UndecodableRequest ? Promise.reject(request.error(method)) : fn(request as Record<string, unknown>, rpc);
    result.then(
      (response) => {
        settled();
        // Past its deadline (grpc-js's timer may not have run yet) the call is answered DEADLINE_EXCEEDED.
        if (!ended() && Date.now() < deadlineMs) callback(null, response ?? {});
        else unanswered();
      },
      (e: unknown) => {
        settled();
        if (!ended() || !waiting?.closing) callback(toStatus(e, logger, method));
      },
    );
  };
}

function unimplemented(service: string, method: string): grpc.handleUnaryCall<unknown, unknown> {
  return (_call, callback) => callback({ code: grpc.status.UNIMPLEMENTED, details: `Orderly does not implement ${service}.${method} yet` });
}

/**
 * google.pubsub.v1 (Publisher, Subscriber, SchemaService) and google.iam.v1.IAMPolicy over the core, for
 * Google's client libraries via PUBSUB_EMULATOR_HOST. `options` are grpc-js server options (limits,
 * keepalive, interceptors). `endStreams` ends the open StreamingPull streams and waiting Pull calls with
 * UNAVAILABLE (and any opened after), for a server about to shut down.
 */
export function pubsubServices(
  core: PubSubCore,
  options: grpc.ServerOptions = {},
  logger?: Logger,
): { server: grpc.Server; endStreams: () => void } {
  const proto = loadPubsubProto();
  const openStreams = new OpenStreams();
  const handlers = pubsubHandlers(core);
  const server = new grpc.Server(options);
  for (const [serviceName, methods] of Object.entries(handlers)) {
    const client = serviceName
      .split('.')
      .reduce<grpc.GrpcObject>((ns, part) => ns[part] as grpc.GrpcObject, proto) as unknown as grpc.ServiceClientConstructor;
    const service = client.service;
    const implementation: grpc.UntypedServiceImplementation = {};
    for (const method of Object.keys(service)) {
      if (method === 'StreamingPull')
        implementation[method] = ((call) => streamingPull(core, call, logger, openStreams)) as grpc.handleBidiStreamingCall<
          StreamingPullRequest,
          unknown
        >;
      else
        implementation[method] = methods[method]
          ? unary(method, methods[method], logger, method === 'Pull' ? openStreams : undefined)
          : unimplemented(serviceName, method);
    }
    server.addService(withEncodedDeliveries(withUndecodableRequests(service)), implementation);
  }
  return { server, endStreams: () => openStreams.endAll() };
}
