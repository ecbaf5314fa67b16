import { InvalidArgumentError } from './errors.js';
import { messageSize, type MessageInput } from './message.js';

/** Pub/Sub's published quotas (https://cloud.google.com/pubsub/quotas), enforced at publish. */
export const LIMITS = {
  maxDataBytes: 10_000_000,
  maxAttributes: 100,
  maxAttributeKeyBytes: 256,
  maxAttributeValueBytes: 1024,
  maxOrderingKeyBytes: 1024,
  maxBatchMessages: 1000,
  maxBatchBytes: 10 * 1024 * 1024,
} as const;

export interface ValidMessage {
  data: Buffer;
  attributes: Record<string, string>;
  orderingKey: string;
}

/** A message's place in its request, built only for an error (a string per message published was garbage). */
function where(index: number): string {
  return `messages[${index}]`;
}

/**
 * A caller in JavaScript (or with data parsed from JSON) is not held to MessageInput's types: a number as
 * data or ordering key failed inside Buffer with an untyped TypeError, and a string as attributes was
 * stored as its characters (`{"0": "n", "1": "o"}`).
 */
function checkShape(input: MessageInput, index: number): void {
  if (typeof input !== 'object' || input === null)
    throw new InvalidArgumentError(where(index), `must be an object with data, attributes and/or orderingKey, got ${kindOf(input)}`);
  const { data, attributes, orderingKey } = input as Record<keyof MessageInput, unknown>;
  if (data !== undefined && typeof data !== 'string' && !(data instanceof Uint8Array))
    throw new InvalidArgumentError(`${where(index)}.data`, `must be a string or bytes (a Uint8Array or Buffer), got ${kindOf(data)}`);
  if (attributes !== undefined && (typeof attributes !== 'object' || attributes === null || Array.isArray(attributes)))
    throw new InvalidArgumentError(`${where(index)}.attributes`, `must be an object of string values, got ${kindOf(attributes)}`);
  if (orderingKey !== undefined && typeof orderingKey !== 'string')
    throw new InvalidArgumentError(`${where(index)}.orderingKey`, `must be a string, got ${kindOf(orderingKey)}`);
}

function kindOf(value: unknown): string {
  return value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value;
}

export function validateMessage(input: MessageInput, index: number): ValidMessage {
  checkShape(input, index);
  const data =
    input.data === undefined ? Buffer.alloc(0) : typeof input.data === 'string' ? Buffer.from(input.data) : Buffer.from(input.data);
  if (data.byteLength > LIMITS.maxDataBytes) {
    throw new InvalidArgumentError(`${where(index)}.data`, `must be at most ${LIMITS.maxDataBytes} bytes, got ${data.byteLength}`);
  }
  const attributes = input.attributes ?? {};
  // Own properties only, as `{ ...attributes }` below keeps only those (an inherited one is neither checked nor stored).
  let count = 0;
  for (const k in attributes) if (Object.hasOwn(attributes, k)) count++;
  if (count > LIMITS.maxAttributes) {
    throw new InvalidArgumentError(`${where(index)}.attributes`, `at most ${LIMITS.maxAttributes} attributes, got ${count}`);
  }
  for (const k in attributes) {
    if (!Object.hasOwn(attributes, k)) continue;
    const v = attributes[k];
    if (typeof v !== 'string') throw new InvalidArgumentError(`${where(index)}.attributes["${k}"]`, 'value must be a string');
    const kb = Buffer.byteLength(k);
    if (kb === 0 || kb > LIMITS.maxAttributeKeyBytes) {
      throw new InvalidArgumentError(
        `${where(index)}.attributes`,
        `key must be 1 to ${LIMITS.maxAttributeKeyBytes} bytes, got ${kb} ("${k.slice(0, 40)}")`,
      );
    }
    if (k.startsWith('goog'))
      throw new InvalidArgumentError(`${where(index)}.attributes["${k}"]`, 'keys starting with "goog" are reserved');
    const vb = Buffer.byteLength(v);
    if (vb > LIMITS.maxAttributeValueBytes) {
      throw new InvalidArgumentError(
        `${where(index)}.attributes["${k}"]`,
        `value must be at most ${LIMITS.maxAttributeValueBytes} bytes, got ${vb}`,
      );
    }
  }
  const orderingKey = input.orderingKey ?? '';
  const okb = Buffer.byteLength(orderingKey);
  if (okb > LIMITS.maxOrderingKeyBytes) {
    throw new InvalidArgumentError(`${where(index)}.orderingKey`, `must be at most ${LIMITS.maxOrderingKeyBytes} bytes, got ${okb}`);
  }
  if (data.byteLength === 0 && count === 0) {
    throw new InvalidArgumentError(where(index), 'a message needs non-empty data or at least one attribute');
  }
  return { data, attributes: { ...attributes }, orderingKey };
}

export function validateBatch(inputs: MessageInput[]): ValidMessage[] {
  if (!Array.isArray(inputs)) throw new InvalidArgumentError('messages', `must be an array of messages, got ${kindOf(inputs)}`);
  if (inputs.length === 0) throw new InvalidArgumentError('messages', 'at least one message is required');
  if (inputs.length > LIMITS.maxBatchMessages) {
    throw new InvalidArgumentError('messages', `at most ${LIMITS.maxBatchMessages} messages per publish, got ${inputs.length}`);
  }
  const messages = inputs.map(validateMessage);
  const total = messages.reduce((sum, m) => sum + messageSize(m), 0);
  if (total > LIMITS.maxBatchBytes) {
    throw new InvalidArgumentError('messages', `a publish request must be at most ${LIMITS.maxBatchBytes} bytes, got ${total}`);
  }
  return messages;
}
