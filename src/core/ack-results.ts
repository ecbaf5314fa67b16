import { OrderlyError, type ErrorInfo } from './errors.js';

/** What became of each ack id of one acknowledge or modifyAckDeadline. */
export interface AckResult {
  /** Settled (or extended) as asked; for acks, durably. */
  ackIds: string[];
  /**
   * No longer valid: unknown, or their lease had ended (settled, expired, revoked by an earlier message's
   * redelivery, or forgotten by a seek). Ignored on ordinary subscriptions; refused on exactly-once ones.
   */
  invalidAckIds: string[];
}

/** The ErrorInfo metadata value Google's clients map to `AckResponses.Invalid`. */
export const INVALID_ACK_ID = 'PERMANENT_FAILURE_INVALID_ACK_ID';

/**
 * An acknowledge or modifyAckDeadline on an exactly-once subscription named ack ids that are no longer
 * valid. Pub/Sub answers INVALID_ARGUMENT with a google.rpc.ErrorInfo whose metadata maps each failed ack id
 * to `PERMANENT_FAILURE_INVALID_ACK_ID`; the valid ids of the same request were carried out.
 */
export class InvalidAckIdsError extends OrderlyError {
  override readonly errorInfo: ErrorInfo;

  constructor(
    subscription: string,
    readonly invalidAckIds: string[],
  ) {
    super(
      'INVALID_ARGUMENT',
      'Some acknowledgement ids in the request were invalid. This could be because the acknowledgement ids have expired or the acknowledgement ids were malformed. ' +
        `(${invalidAckIds.length} of them, on exactly-once subscription ${subscription}: the message is delivered again, or was settled already.)`,
    );
    this.errorInfo = {
      reason: 'EXACTLY_ONCE_ACKID_FAILURE',
      domain: 'pubsub.googleapis.com',
      metadata: Object.fromEntries(invalidAckIds.map((id) => [id, INVALID_ACK_ID])),
    };
  }
}
