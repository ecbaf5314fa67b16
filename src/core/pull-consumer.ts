import { InvalidArgumentError } from './errors.js';
import type { ReceivedMessage } from './message.js';
import type { SubscriptionRuntime } from './subscription-runtime.js';

/**
 * A Pull answer takes messages while their bytes (`messageSize`) stay under this, so it ends at most one
 * message past it: Google's Java and Go clients refuse a response over 20 MiB (their gRPC max inbound
 * message size). 9 MiB + one message of up to 10 MB + the encoding of up to 1,000 messages (ack ids, ids,
 * times, each attribute's tags: well under 1 MB) stays below that; at 10 MiB the sum could pass it.
 * Pub/Sub, too, returns fewer than maxMessages.
 */
const PULL_RESPONSE_BYTES = 9 * 1024 * 1024;

/**
 * One Pull call: a consumer that takes up to `maxMessages` ready messages (a key's messages in order, one
 * batch per key out), waiting up to `waitMs` for the first ones (Pub/Sub's returnImmediately=false).
 *
 * Once `signal` aborts (the call was cancelled or passed its deadline) the consumer detaches at once,
 * with nothing leased: left attached, it would take messages for a caller that is gone, and each would
 * count a delivery attempt when its lease expired. A call found gone only when its answer is to be
 * written gives its messages back (PubSubCore.release, which the transports call); once written, as for
 * Pub/Sub, whether the client read it is not known and the leases run their course.
 */
export function pullOnce(
  runtime: SubscriptionRuntime,
  maxMessages: number,
  waitMs: number,
  signal?: AbortSignal,
): Promise<ReceivedMessage[]> {
  if (!Number.isInteger(maxMessages) || maxMessages < 1)
    throw new InvalidArgumentError('maxMessages', `must be a positive integer, got ${maxMessages}`);
  if (signal?.aborted) return Promise.resolve([]);
  return new Promise((resolve) => {
    let timer: NodeJS.Timeout | undefined;
    let done = false;
    const finish = (batch: ReceivedMessage[]) => {
      if (done) return;
      done = true;
      handle.detach();
      signal?.removeEventListener('abort', abandoned);
      if (timer) clearTimeout(timer);
      resolve(batch);
    };
    const abandoned = () => finish([]);
    const handle = runtime.attach(
      {
        affinity: 'pull',
        room: () => ({ messages: done ? 0 : maxMessages, bytes: PULL_RESPONSE_BYTES }),
        deliver: (batch) => finish(batch),
        detached: () => finish([]),
      },
      true,
    );
    signal?.addEventListener('abort', abandoned);
    runtime.dispatch();
    if (!waitMs) finish([]);
    else if (!done) timer = setTimeout(() => finish([]), waitMs);
  });
}
