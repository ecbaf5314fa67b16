import type * as grpc from '@grpc/grpc-js';
import type { SubscriptionHandle } from '../core/consumer.js';
import { InvalidArgumentError, NotFoundError } from '../core/errors.js';
import type { ReceivedMessage } from '../core/message.js';
import type { PubSubCore } from '../core/pubsub-core.js';
import type { Logger } from '../log.js';
import { toStatus, UndecodableRequest } from './grpc-errors.js';
import { receivedToProto } from './proto-mapping.js';

/** google.pubsub.v1.StreamingPullRequest as proto-loader decodes it (int64 as strings, defaults filled). */
export interface StreamingPullRequest {
  subscription: string;
  ackIds: string[];
  modifyDeadlineSeconds: number[];
  modifyDeadlineAckIds: string[];
  streamAckDeadlineSeconds: number;
  maxOutstandingMessages: string;
  maxOutstandingBytes: string;
}

const METHOD = 'StreamingPull';
const DEFAULT_MAX_OUTSTANDING_MESSAGES = 1000;

/**
 * One StreamingPull stream is one consumer (a key with outstanding messages stays on its stream); acks
 * and modacks may come on the stream or as unary calls, and ack ids stay valid after their stream ended.
 * A request the server cannot honour (a bad deadline, a deleted subscription) ends this stream with its
 * status code; other streams and calls are not affected.
 */
export function streamingPull(core: PubSubCore, call: grpc.ServerDuplexStream<StreamingPullRequest, unknown>, logger?: Logger): void {
  let handle: SubscriptionHandle | undefined;
  let ended = false;
  const close = () => {
    handle?.detach();
    handle = undefined;
  };
  const fail = (e: unknown) => {
    if (ended) return;
    ended = true;
    close();
    // grpc-js turns an 'error' event on a server stream into the status it ends with.
    call.emit('error', toStatus(e, logger, METHOD));
  };

  const open = (req: StreamingPullRequest) => {
    if (!req.subscription) throw new InvalidArgumentError('subscription', 'is required in the first request of a stream');
    const deadline = req.streamAckDeadlineSeconds;
    if (deadline !== 0 && (!Number.isInteger(deadline) || deadline < 10 || deadline > 600)) {
      throw new InvalidArgumentError('streamAckDeadlineSeconds', `must be an integer between 10 and 600, got ${deadline}`);
    }
    const name = core.getSubscription(req.subscription).name;
    // Pub/Sub: zero or less means no client-side limit; the default keeps one stream from taking everything.
    const maxMessages = Number(req.maxOutstandingMessages) > 0 ? Number(req.maxOutstandingMessages) : DEFAULT_MAX_OUTSTANDING_MESSAGES;
    const maxBytes = Number(req.maxOutstandingBytes) > 0 ? Number(req.maxOutstandingBytes) : Number.MAX_SAFE_INTEGER;
    const opened: SubscriptionHandle = core.attach(name, {
      ackDeadlineSeconds: deadline || undefined,
      room: () => ({ messages: maxMessages - opened.outstanding(), bytes: maxBytes }),
      deliver: (batch: ReceivedMessage[]) => {
        call.write({
          receivedMessages: batch.map(receivedToProto),
          subscriptionProperties: { messageOrderingEnabled: opened.spec.enableMessageOrdering, exactlyOnceDeliveryEnabled: opened.spec.enableExactlyOnceDelivery },
        });
      },
      // As Pub/Sub does, a stream ends with NOT_FOUND when its subscription is deleted.
      detached: () => fail(new NotFoundError('Subscription', name)),
    });
    return opened;
  };

  /** Checks the whole request before acting on any of it, so a refused request changes nothing. */
  const settle = async (req: StreamingPullRequest, stream: SubscriptionHandle) => {
    const name = stream.subscription;
    if (req.subscription && core.subscriptionName(req.subscription) !== name) {
      throw new InvalidArgumentError('subscription', `a stream serves one subscription (${name}); got ${req.subscription} in a later request`);
    }
    const ids = req.modifyDeadlineAckIds;
    const seconds = req.modifyDeadlineSeconds;
    if (ids.length !== seconds.length) {
      throw new InvalidArgumentError('modifyDeadlineSeconds', `must have one entry per modifyDeadlineAckIds entry (${ids.length}), got ${seconds.length}`);
    }
    seconds.forEach((s, i) => {
      if (!Number.isInteger(s) || s < 0 || s > 600) throw new InvalidArgumentError(`modifyDeadlineSeconds[${i}]`, `must be an integer between 0 and 600, got ${s}`);
    });
    if (req.ackIds.length) await stream.acknowledge(req.ackIds);
    const bySeconds = new Map<number, string[]>();
    ids.forEach((id, i) => bySeconds.set(seconds[i]!, [...(bySeconds.get(seconds[i]!) ?? []), id]));
    for (const [s, group] of bySeconds) stream.modifyAckDeadline(group, s);
    // Acks and modacks change what the stream may receive next.
    stream.kick();
  };

  call.on('data', (req: StreamingPullRequest | UndecodableRequest) => {
    if (ended) return;
    try {
      if (req instanceof UndecodableRequest) throw req.error(METHOD);
      handle ??= open(req);
      settle(req, handle).catch(fail);
    } catch (e) {
      fail(e);
    }
  });
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
