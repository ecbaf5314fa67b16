import type { ConnectorContext, ConnectorSettings, ExportMessage } from '../../src/connector/connector.js';
import { DEFAULT_BUDGET } from '../../src/connector/export-runner.js';
import type { SubscriptionSpec } from '../../src/core/subscription-config.js';
import { createLogger } from '../../src/log.js';

/**
 * What the export runner gives a connector, for a writer a test builds and drives itself: subscription
 * `projects/p/subscriptions/<id>` with uid `<id>-uid`, ordered unless `spec` says otherwise.
 */
export function writerContext(
  id: string,
  settings: ConnectorSettings,
  options: Partial<Pick<ConnectorContext, 'budget' | 'topicSchema'>> & { spec?: Partial<SubscriptionSpec> } = {},
): ConnectorContext {
  return {
    subscription: `projects/p/subscriptions/${id}`,
    identity: { uid: `${id}-uid`, adoptsNameKeyedProgress: false },
    // A writer reads only the fields a test sets; the rest of a spec is the core's business.
    spec: { enableMessageOrdering: true, ...options.spec } as SubscriptionSpec,
    logger: createLogger(),
    settings,
    budget: options.budget ?? DEFAULT_BUDGET,
    notify: () => undefined,
    ...(options.topicSchema && { topicSchema: options.topicSchema }),
  };
}

/** A delivery of `key` at `sequence` as the runner hands it over; its message id and payload name both. */
export function keyedExportMessage(key: string, sequence: number, deliveryAttempt = 0): ExportMessage {
  return {
    id: `${key}-${sequence}`,
    deliveryAttempt,
    message: {
      messageId: `${key}${sequence}`,
      publishTime: new Date(),
      data: Buffer.from(`${key}${sequence}`),
      attributes: {},
      orderingKey: key,
      sequence,
    },
  };
}
