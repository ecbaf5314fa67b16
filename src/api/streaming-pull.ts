import type * as grpc from '@grpc/grpc-js';
import type { AckResult } from '../core/ack-results.js';
import type { StoredDelivery, SubscriptionHandle } from '../core/consumer.js';
import { InvalidArgumentError } from '../core/errors.js';
import type { PubSubCore } from '../core/pubsub-core.js';
import type { Logger } from '../log.js';
import { shuttingDown, toStatus, UndecodableRequest } from './grpc-errors.js';
import { encodeDeliveries } from './streaming-pull-response.js';

/** google.pubsub.v1.StreamingPullRequest as proto-loader decodes it (int64 as strings, defaults filled). */
export interface StreamingPullRequest {
  subscription: string;
  ackIds: string[];
  modifyDeadlineSeconds: number[];
  modifyDeadlineAckIds: string[];
  streamAckDeadlineSeconds: number;
  maxOutstandingMessages: string;
  maxOutstandingBytes: string;
  protocolVersion: string;
}

/** Fields only the first request of a stream may set (Pub/Sub aborts a stream whose later request sets one). */
const FIRST_REQUEST_ONLY = ['maxOutstandingMessages', 'maxOutstandingBytes', 'protocolVersion'] as const;

const METHOD = 'StreamingPull';
/**
 * A delivery goes out in responses of at most this many messages, so the client handles and acks the
 * first while the server encodes the next, and the acks it frees are refilled while the rest are in
 * flight; one response of everything would make the stream a ping-pong of its whole window.
 */
const MAX_MESSAGES_PER_RESPONSE = 250;
/**
 * And of at most this many bytes of messages (one larger message goes alone): Google's Java and Go
 * subscribers refuse a response over 20 MiB (their gRPC max inbound message size), as Pub/Sub never sends.
 */
const MAX_RESPONSE_BYTES = 10 * 1024 * 1024;
/** Per message, about what a response carries besides the message's data, attributes and key (ack id, ids, time, tags). */
const RESPONSE_OVERHEAD = 128;

/** A delivery cut into responses of at most MAX_MESSAGES_PER_RESPONSE messages and MAX_RESPONSE_BYTES bytes. */
function* responses(batch: StoredDelivery[]): Generator<StoredDelivery[]> {
  let start = 0;
  let bytes = 0;
  for (let i = 0; i < batch.length; i++) {
    const size = batch[i]!.size + RESPONSE_OVERHEAD;
    if (i > start && (i - start === MAX_MESSAGES_PER_RESPONSE || bytes + size > MAX_RESPONSE_BYTES)) {
      yield batch.slice(start, i);
      start = i;
      bytes = 0;
    }
    bytes += size;
  }
  if (start === 0) yield batch;
  else if (start < batch.length) yield batch.slice(start);
}

/**
 * One StreamingPull stream is one consumer (a key with outstanding messages stays on its stream); acks
 * and modacks may come on the stream or as unary calls, and ack ids stay valid after their stream ended.
 * A request the server cannot honour (a bad deadline, a deleted or detached subscription) ends this
 * stream with its status code; other streams and calls are not affected. On an exactly-once subscription
 * the stream confirms each request's acks and modacks (`acknowledgeConfirmation`,
 * `modifyAckDeadlineConfirmation`), once the acks are durable.
 */
export function streamingPull(
  core: PubSubCore,
  call: grpc.ServerDuplexStream<StreamingPullRequest, unknown>,
  logger?: Logger,
  openStreams?: OpenStreams,
): void {
  let handle: SubscriptionHandle | undefined;
  let ended = false;
  const close = () => {
    handle?.detach();
    handle = undefined;
    openStreams?.streams.delete(goAway);
  };
  const end = (status: grpc.StatusObject) => {
    if (ended) return;
    ended = true;
    close();
    // grpc-js turns an 'error' event on a server stream into the status it ends with.
    call.emit('error', status);
  };
  const fail = (e: unknown) => end(toStatus(e, logger, METHOD));
  /** The server is stopping: UNAVAILABLE, which every Google client retries (on another server, or this one restarted). */
  const goAway = () => end(shuttingDown());
  if (openStreams?.closing) return goAway();
  openStreams?.streams.add(goAway);

  /** The stream's ack deadline: the first request's, changed by any later one that gives one (0: the subscription's). */
  let deadlineSeconds: number | undefined;
  const setDeadline = (req: StreamingPullRequest) => {
    const deadline = req.streamAckDeadlineSeconds;
    if (deadline === 0) return;
    if (!Number.isInteger(deadline) || deadline < 10 || deadline > 600)
      throw new InvalidArgumentError('streamAckDeadlineSeconds', `must be an integer between 10 and 600, got ${deadline}`);
    deadlineSeconds = deadline;
  };

  const open = (req: StreamingPullRequest) => {
    if (!req.subscription) throw new InvalidArgumentError('subscription', 'is required in the first request of a stream');
    setDeadline(req);
    // A missing subscription ends the stream now with NOT_FOUND; a detached one (in attach) with FAILED_PRECONDITION.
    const name = core.getSubscription(req.subscription).name;
    // Zero or less is no limit, in the proto's words: Google's clients send 0 with legacy flow control and
    // then limit themselves (a cap here would starve a handler that waits for a batch larger than it). What
    // such a stream can hold is the subscription's window of messages in memory.
    const maxMessages = Number(req.maxOutstandingMessages) > 0 ? Number(req.maxOutstandingMessages) : Number.MAX_SAFE_INTEGER;
    const maxBytes = Number(req.maxOutstandingBytes) > 0 ? Number(req.maxOutstandingBytes) : Number.MAX_SAFE_INTEGER;
    const opened: SubscriptionHandle = core.attachPull(name, {
      get ackDeadlineSeconds() {
        return deadlineSeconds;
      },
      // A client that does not read leaves its responses in the stream's buffer: none more until it drains.
      // Each lease that expired meanwhile came again on the same stream and was buffered again, without end.
      room: () =>
        call.writableNeedDrain
          ? { messages: 0, bytes: 0 }
          : { messages: maxMessages - opened.outstanding(), bytes: maxBytes - opened.outstandingBytes() },
      // Encoded at once, so the stored form: no message object of its own per delivery.
      deliverStored: (batch: StoredDelivery[]) => {
        const properties = { exactlyOnce: opened.spec.enableExactlyOnceDelivery, ordering: opened.spec.enableMessageOrdering };
        for (const response of responses(batch)) call.write(encodeDeliveries(response, properties));
      },
      // As Pub/Sub does, a stream ends with NOT_FOUND when its subscription is deleted, FAILED_PRECONDITION when detached.
      detached: (reason) => fail(reason),
    });
    return opened;
  };

  /** Checks the whole request before acting on any of it, so a refused request changes nothing. */
  const settle = async (req: StreamingPullRequest, stream: SubscriptionHandle, first: boolean) => {
    const name = stream.subscription;
    // Flow control is the stream's for its life: a later value was ignored, silently.
    const late = first ? undefined : FIRST_REQUEST_ONLY.find((field) => Number(req[field]) !== 0);
    if (late) throw new InvalidArgumentError(late, `can only be set in the first request of a stream, got ${req[late]} in a later one`);
    // Malformed ids abort the stream, as in Pub/Sub.
    core.checkAckIds(name, req.ackIds, 'ackIds');
    core.checkAckIds(name, req.modifyDeadlineAckIds, 'modifyDeadlineAckIds');
    if (req.subscription && core.subscriptionName(req.subscription) !== name) {
      throw new InvalidArgumentError(
        'subscription',
        `a stream serves one subscription (${name}); got ${req.subscription} in a later request`,
      );
    }
    const ids = req.modifyDeadlineAckIds;
    const seconds = req.modifyDeadlineSeconds;
    if (ids.length !== seconds.length) {
      throw new InvalidArgumentError(
        'modifyDeadlineSeconds',
        `must have one entry per modifyDeadlineAckIds entry (${ids.length}), got ${seconds.length}`,
      );
    }
    seconds.forEach((s, i) => {
      if (!Number.isInteger(s) || s < 0 || s > 600)
        throw new InvalidArgumentError(`modifyDeadlineSeconds[${i}]`, `must be an integer between 0 and 600, got ${s}`);
    });
    setDeadline(req);
    const acked = req.ackIds.length ? await stream.acknowledge(req.ackIds) : undefined;
    const bySeconds = new Map<number, string[]>();
    ids.forEach((id, i) => bySeconds.set(seconds[i]!, [...(bySeconds.get(seconds[i]!) ?? []), id]));
    const modacked: AckResult[] = [];
    for (const [s, group] of bySeconds) modacked.push(stream.modifyAckDeadline(group, s));
    // Acks and modacks change what the stream may receive next.
    stream.kick();
    if (stream.spec.enableExactlyOnceDelivery && !ended && (acked || modacked.length)) call.write(confirmation(stream, acked, modacked));
  };

  call.on('data', (req: StreamingPullRequest | UndecodableRequest) => {
    if (ended) return;
    try {
      if (req instanceof UndecodableRequest) throw req.error(METHOD);
      const first = !handle;
      handle ??= open(req);
      settle(req, handle, first).catch(fail);
    } catch (e) {
      fail(e);
    }
  });
  call.on('drain', () => handle?.kick());
  call.on('end', () => {
    close();
    if (!ended) call.end();
    ended = true;
  });
  call.on('cancelled', () => {
    ended = true;
    close();
  });
  call.on('error', close);
}

/**
 * The StreamingPull streams (and Pull calls waiting for messages) a server has open, so that stopping it
 * ends them with UNAVAILABLE at once, as Pub/Sub ends streams it moves: left to the server's shutdown they
 * would be cut with CANCELLED, which Google's Python subscriber takes as final, after a wait for
 * calls that do not end by themselves soon.
 */
export class OpenStreams {
  readonly streams = new Set<() => void>();
  closing = false;

  /** Ends every open stream with UNAVAILABLE; streams opened from now on end so at once. */
  endAll(): void {
    this.closing = true;
    for (const goAway of [...this.streams]) goAway();
  }
}

/**
 * The StreamingPull method as grpc-js serves it: a response already in wire format (`encodeDeliveries`)
 * goes out as it is; any other through proto-loader.
 */
export function withEncodedDeliveries(service: grpc.ServiceDefinition): grpc.ServiceDefinition {
  const method = service.StreamingPull;
  if (!method) return service;
  const serialize = method.responseSerialize;
  return {
    ...service,
    StreamingPull: { ...method, responseSerialize: (value: unknown) => (Buffer.isBuffer(value) ? value : serialize(value)) },
  };
}

function properties(stream: SubscriptionHandle): Record<string, boolean> {
  return { messageOrderingEnabled: stream.spec.enableMessageOrdering, exactlyOnceDeliveryEnabled: stream.spec.enableExactlyOnceDelivery };
}

/**
 * The exactly-once answer to one request's acks and modacks. Orderly settles acks in any order and only
 * reports durable acks as done, so `unorderedAckIds` and `temporaryFailedAckIds` stay empty (a failed
 * durable write ends the stream instead).
 */
function confirmation(stream: SubscriptionHandle, acked: AckResult | undefined, modacked: AckResult[]): Record<string, unknown> {
  const response: Record<string, unknown> = { receivedMessages: [], subscriptionProperties: properties(stream) };
  if (acked)
    response.acknowledgeConfirmation = {
      ackIds: acked.ackIds,
      invalidAckIds: acked.invalidAckIds,
      unorderedAckIds: [],
      temporaryFailedAckIds: [],
    };
  if (modacked.length) {
    response.modifyAckDeadlineConfirmation = {
      ackIds: modacked.flatMap((r) => r.ackIds),
      invalidAckIds: modacked.flatMap((r) => r.invalidAckIds),
      temporaryFailedAckIds: [],
    };
  }
  return response;
}
