import type { SubscriptionState } from '../../core/consumer.js';
import type { PubSubCore } from '../../core/pubsub-core.js';
import type { SubscriptionSpec } from '../../core/subscription-config.js';
import { SourceError, type DeliveryHandle, type ExportSource, type SourceConsumer, type SourceStatus } from './source.js';

/**
 * An export subscription of the embedded core: attached through the core's consumer port, which keeps
 * the leases of everything the runner holds alive, delivers a key's next messages while earlier ones are
 * still held (the runner handles them strictly in order), and revokes a key's later deliveries when one
 * fails. The runner serves the subscription with this uid only: one created again under the same name
 * is another export.
 */
export class EmbeddedSource implements ExportSource {
  readonly subscription: string;

  constructor(
    private readonly core: PubSubCore,
    subscription: string,
    private readonly uid: string,
    private readonly delivery: {
      /** Most messages of one key in one delivery (the runner's batch size). */
      maxPerKey: number;
      /** The subscription's window while the runner is attached (ConsumerSpec.windowMessages); unset: the core's. */
      windowMessages?: number;
    },
  ) {
    this.subscription = core.subscriptionName(subscription);
  }

  /** The subscription is still the one this source was made for (not deleted, not created again). */
  private serving(): boolean {
    return this.core.hasSubscription(this.subscription) && this.core.identity(this.subscription).uid === this.uid;
  }

  async prepare(): Promise<SubscriptionSpec> {
    if (!this.serving()) throw new SourceError(`subscription ${this.subscription} was deleted`, 'refused');
    return this.core.getSubscription(this.subscription);
  }

  attach(consumer: SourceConsumer): DeliveryHandle | undefined {
    if (!this.serving()) return undefined;
    const handle = this.core.attach(this.subscription, {
      affinity: `export-${this.subscription}`,
      maxPerKey: this.delivery.maxPerKey,
      windowMessages: this.delivery.windowMessages,
      pipelined: true,
      // What the connector holds (an open file, a pending upload) stays leased until it is settled.
      keepAliveSeconds: Number.POSITIVE_INFINITY,
      room: () => consumer.room(),
      deliver: (batch) => consumer.deliver(batch),
      sought: () => consumer.sought?.(),
    });
    return {
      get attached() {
        return handle.attached;
      },
      isLive: (id) => handle.isLive(id),
      acknowledge: async (ids) => {
        await handle.acknowledge(ids);
      },
      nack: (ids, error) => handle.modifyAckDeadline(ids, 0, error),
      detach: async () => handle.detach(),
    };
  }

  setState(state: SubscriptionState): void {
    if (this.serving()) this.core.setSubscriptionState(this.subscription, state);
  }

  status(): SourceStatus {
    return { location: 'embedded', state: 'streaming', retries: 0 };
  }
}
