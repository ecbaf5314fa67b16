import type { StoredMessage } from '../store/store.js';
import { projectOf, shortId } from './names.js';

/** The attributes Pub/Sub adds to a message it forwards to a subscription's dead-letter topic. */
export function deadLetterAttributes(subscription: string, m: StoredMessage, failures: number, lastError?: string): Record<string, string> {
  const attributes: Record<string, string> = {
    ...m.attributes,
    CloudPubSubDeadLetterSourceDeliveryCount: String(failures),
    CloudPubSubDeadLetterSourceSubscription: shortId(subscription),
    CloudPubSubDeadLetterSourceSubscriptionProject: projectOf(subscription),
    CloudPubSubDeadLetterSourceTopicPublishTime: new Date(m.publishTime).toISOString(),
  };
  if (lastError !== undefined) attributes.CloudPubSubDeadLetterSourceDeliveryErrorMessage = lastError.slice(0, 1024);
  return attributes;
}
