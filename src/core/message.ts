/** What a publisher hands in. `data` may be a string (UTF-8) for convenience. */
export interface MessageInput {
  data?: Uint8Array | string;
  attributes?: Record<string, string>;
  orderingKey?: string;
}

/** A message as stored and delivered. `sequence` is its position within its ordering key (1-based). */
export interface PubsubMessage {
  messageId: string;
  publishTime: Date;
  data: Buffer;
  attributes: Record<string, string>;
  orderingKey: string;
  sequence: number;
}

export interface ReceivedMessage {
  ackId: string;
  message: PubsubMessage;
  /** 1 + nacks + expiries of this message; 0 when the subscription has no dead-letter policy (as Pub/Sub). */
  deliveryAttempt: number;
}

/**
 * A message's size as messageSize counts it once validated, read off a caller's input (batching before
 * validation: an attribute that is not a string, which validation refuses, counts nothing).
 */
export function inputSize(m: MessageInput): number {
  const d = m.data;
  let size = d === undefined ? 0 : typeof d === 'string' ? Buffer.byteLength(d) : d.byteLength;
  size += m.orderingKey ? Buffer.byteLength(m.orderingKey) : 0;
  const attributes = m.attributes ?? {};
  for (const k in attributes) {
    const v = attributes[k];
    if (Object.hasOwn(attributes, k)) size += Buffer.byteLength(k) + (typeof v === 'string' ? Buffer.byteLength(v) : 0);
  }
  return size;
}

/** Payload, ordering key and attributes in bytes (UTF-8), as Pub/Sub counts a message's size. */
export function messageSize(m: { data: Uint8Array; attributes: Record<string, string>; orderingKey: string }): number {
  let size = m.data.byteLength + (m.orderingKey === '' ? 0 : Buffer.byteLength(m.orderingKey));
  // for-in, not Object.entries: no array per message (it runs for every delivery, twice in an export).
  const { attributes } = m;
  for (const k in attributes) if (Object.hasOwn(attributes, k)) size += Buffer.byteLength(k) + Buffer.byteLength(attributes[k]!);
  return size;
}
