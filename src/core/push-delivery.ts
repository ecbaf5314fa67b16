import type { ReceivedMessage } from './message.js';
import type { PubSubCore } from './pubsub-core.js';
import { OrderlyError } from './errors.js';
import { checkPushAttributes, postJson, PushEgressRefused, type PushEgress } from './push-egress.js';
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
 * anything else (a redirect included: they are not followed) or no answer within the ack deadline nacks
 * it. At most one message per ordering key is out at a time, as Pub/Sub does for ordered push. Where
 * requests may go is `PushEgress` (no link-local or metadata addresses unless allowed).
 */
export class PushDelivery {
  private inflight = 0;
  private stopped = false;
  private readonly consumer: Consumer;

  constructor(
    private readonly core: PubSubCore,
    private readonly subscription: string,
    private readonly egress: PushEgress,
    /** A failure to record the outcome (the message will be delivered again). */
    private readonly onError: (e: unknown) => void,
  ) {
    this.consumer = {
      id: `push-${subscription}`,
      affinity: 'push',
      maxPerKey: 1,
      room: () => ({ messages: this.stopped ? 0 : MAX_CONCURRENT_REQUESTS - this.inflight, bytes: Number.MAX_SAFE_INTEGER }),
      deliver: (batch) => batch.forEach((m) => this.send(m).catch(this.onError)),
    };
    core.runtime(subscription).addConsumer(this.consumer);
  }

  private async send(m: ReceivedMessage): Promise<void> {
    this.inflight++;
    const rt = this.core.runtime(this.subscription);
    const { pushEndpoint, attributes } = rt.spec.pushConfig!;
    let failure: string | undefined = 'no answer';
    try {
      // A subscription stored before attributes were checked at creation is refused here instead.
      checkPushAttributes(attributes);
      const status = await postJson(pushEndpoint, JSON.stringify(pushEnvelope(this.subscription, m)), attributes, {
        timeoutMs: rt.spec.ackDeadlineSeconds * 1000,
        egress: this.egress,
      });
      if (status >= 200 && status < 300) failure = undefined;
      else if (status >= 300 && status < 400) failure = `push endpoint answered HTTP ${status}; redirects are not followed`;
      else failure = `push endpoint answered HTTP ${status}`;
    } catch (e) {
      failure = e instanceof PushEgressRefused || e instanceof OrderlyError ? e.message : `push endpoint unreachable: ${(e as Error).message}`;
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
