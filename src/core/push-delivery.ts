import type { ConsumerSpec, SubscriptionHandle } from './consumer.js';
import { OrderlyError } from './errors.js';
import type { ReceivedMessage } from './message.js';
import { checkPushAttributes, postJson, PushEgressRefused, type PushEgress } from './push-egress.js';

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
  private readonly handle: SubscriptionHandle;

  constructor(
    attach: (consumer: ConsumerSpec) => SubscriptionHandle,
    private readonly egress: PushEgress,
    /** A failure to record the outcome (the message will be delivered again). */
    private readonly onError: (e: unknown) => void,
  ) {
    this.handle = attach({
      affinity: 'push',
      maxPerKey: 1,
      room: () => ({ messages: this.stopped ? 0 : MAX_CONCURRENT_REQUESTS - this.inflight, bytes: Number.MAX_SAFE_INTEGER }),
      deliver: (batch) => {
        for (const m of batch) this.send(m).catch(this.onError);
      },
    });
  }

  private async send(m: ReceivedMessage): Promise<void> {
    this.inflight++;
    const { spec, subscription } = this.handle;
    const { pushEndpoint, attributes } = spec.pushConfig!;
    let failure: string | undefined = 'no answer';
    try {
      // A subscription stored before attributes were checked at creation is refused here instead.
      checkPushAttributes(attributes);
      const status = await postJson(pushEndpoint, JSON.stringify(pushEnvelope(subscription, m)), attributes, {
        timeoutMs: spec.ackDeadlineSeconds * 1000,
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
    if (!this.handle.attached) return;
    if (failure === undefined) await this.handle.acknowledge([m.ackId]);
    else this.handle.modifyAckDeadline([m.ackId], 0, failure);
    this.handle.kick();
  }

  stop(): void {
    this.stopped = true;
    this.handle.detach();
  }
}
