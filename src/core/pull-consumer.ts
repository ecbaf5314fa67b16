import { InvalidArgumentError } from './errors.js';
import type { ReceivedMessage } from './message.js';
import type { SubscriptionRuntime } from './subscription-runtime.js';

/**
 * One Pull call: a consumer that takes up to `maxMessages` ready messages (a key's messages in order, one
 * batch per key out), waiting up to `waitMs` for the first ones (Pub/Sub's returnImmediately=false).
 */
export function pullOnce(runtime: SubscriptionRuntime, maxMessages: number, waitMs: number): Promise<ReceivedMessage[]> {
  if (!Number.isInteger(maxMessages) || maxMessages < 1)
    throw new InvalidArgumentError('maxMessages', `must be a positive integer, got ${maxMessages}`);
  return new Promise((resolve) => {
    let timer: NodeJS.Timeout | undefined;
    let done = false;
    const finish = (batch: ReceivedMessage[]) => {
      if (done) return;
      done = true;
      handle.detach();
      if (timer) clearTimeout(timer);
      resolve(batch);
    };
    const handle = runtime.attach(
      {
        affinity: 'pull',
        room: () => ({ messages: done ? 0 : maxMessages, bytes: Number.MAX_SAFE_INTEGER }),
        deliver: (batch) => finish(batch),
        detached: () => finish([]),
      },
      true,
    );
    runtime.dispatch();
    if (!waitMs) finish([]);
    else if (!done) timer = setTimeout(() => finish([]), waitMs);
  });
}
