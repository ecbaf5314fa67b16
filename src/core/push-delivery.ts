import type { ConsumerSpec, SubscriptionHandle } from './consumer.js';
import type { ReceivedMessage } from './message.js';

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
  private readonly handle: SubscriptionHandle;

  constructor(attach: (consumer: ConsumerSpec) => SubscriptionHandle) {
    this.handle = attach({
      affinity: 'push',
      maxPerKey: 1,
      room: () => ({ messages: this.stopped ? 0 : MAX_CONCURRENT_REQUESTS - this.inflight, bytes: Number.MAX_SAFE_INTEGER }),
      deliver: (batch) => {
        for (const m of batch) void this.send(m);
      },
    });
  }

  /** Never rejects: every outcome becomes an ack or a nack. */
  private async send(m: ReceivedMessage): Promise<void> {
    this.inflight++;
    const { spec, subscription } = this.handle;
    let failure: string | undefined = 'no answer';
    try {
      const res = await fetch(spec.pushConfig!.pushEndpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...pushHeaders(spec.pushConfig!.attributes) },
        body: JSON.stringify(pushEnvelope(subscription, m)),
        signal: AbortSignal.timeout(spec.ackDeadlineSeconds * 1000),
      });
      failure = res.status >= 200 && res.status < 300 ? undefined : `push endpoint answered HTTP ${res.status}`;
      await res.body?.cancel();
    } catch (e) {
      failure = `push endpoint unreachable: ${(e as Error).message}`;
    } finally {
      this.inflight--;
    }
    if (!this.handle.attached) return;
    try {
      if (failure === undefined) await this.handle.acknowledge([m.ackId]);
      else this.handle.modifyAckDeadline([m.ackId], 0, failure);
    } catch {
      // The subscription went away meanwhile, or the ack could not be recorded: it is delivered again.
    }
    this.handle.kick();
  }

  stop(): void {
    this.stopped = true;
    this.handle.detach();
  }
}

/** pushConfig.attributes: `x-goog-version` is Pub/Sub's; others are passed on as headers. */
function pushHeaders(attributes: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(attributes).filter(([k]) => /^[A-Za-z0-9-]+$/.test(k)));
}
