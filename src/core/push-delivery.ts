import type { ReceivedMessage } from './message.js';
import type { PubSubCore } from './pubsub-core.js';
import type { Consumer } from './subscription-runtime.js';

const MAX_CONCURRENT_REQUESTS = 100;

/** The JSON body Pub/Sub POSTs to a push endpoint (wrapped form). */
export function pushEnvelope(subscription: string, m: ReceivedMessage): unknown {
  const publishTime = m.message.publishTime.toISOString();
  return {
    message: {
      attributes: m.message.attributes,
      data: m.message.data.toString('base64'),
      messageId: m.message.messageId,
      message_id: m.message.messageId,
      publishTime,
      publish_time: publishTime,
      ...(m.message.orderingKey ? { orderingKey: m.message.orderingKey } : {}),
    },
    subscription,
    ...(m.deliveryAttempt ? { deliveryAttempt: m.deliveryAttempt } : {}),
  };
}

/**
 * Push delivery: each message is its own HTTP POST to `pushConfig.pushEndpoint`; a 2xx answer acks it,
 * anything else (or no answer within the ack deadline) nacks it. At most one message per ordering key is
 * out at a time, as Pub/Sub does for ordered push.
 */
export class PushDelivery {
  private inflight = 0;
  private stopped = false;
  private readonly consumer: Consumer;

  constructor(
    private readonly core: PubSubCore,
    private readonly subscription: string,
  ) {
    this.consumer = {
      id: `push-${subscription}`,
      affinity: 'push',
      maxPerKey: 1,
      room: () => ({ messages: this.stopped ? 0 : MAX_CONCURRENT_REQUESTS - this.inflight, bytes: Number.MAX_SAFE_INTEGER }),
      deliver: (batch) => batch.forEach((m) => void this.send(m)),
    };
    core.runtime(subscription).addConsumer(this.consumer);
  }

  private async send(m: ReceivedMessage): Promise<void> {
    this.inflight++;
    const rt = this.core.runtime(this.subscription);
    const { pushEndpoint, attributes } = rt.spec.pushConfig!;
    let failure: string | undefined = 'no answer';
    try {
      const res = await fetch(pushEndpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...pushHeaders(attributes) },
        body: JSON.stringify(pushEnvelope(this.subscription, m)),
        signal: AbortSignal.timeout(rt.spec.ackDeadlineSeconds * 1000),
      });
      failure = res.status >= 200 && res.status < 300 ? undefined : `push endpoint answered HTTP ${res.status}`;
      await res.body?.cancel();
    } catch (e) {
      failure = `push endpoint unreachable: ${(e as Error).message}`;
    } finally {
      this.inflight--;
    }
    if (!this.core.hasSubscription(this.subscription)) return;
    if (failure === undefined) await this.core.acknowledge(this.subscription, [m.ackId]);
    else await this.core.modifyAckDeadline(this.subscription, [m.ackId], 0, failure);
  }

  stop(): void {
    this.stopped = true;
    if (this.core.hasSubscription(this.subscription)) this.core.runtime(this.subscription).removeConsumer(this.consumer.id);
  }
}

/** pushConfig.attributes: `x-goog-version` is Pub/Sub's; others are passed on as headers. */
function pushHeaders(attributes: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(attributes).filter(([k]) => /^[A-Za-z0-9-]+$/.test(k)));
}
