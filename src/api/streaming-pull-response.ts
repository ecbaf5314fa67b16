import type { StoredDelivery } from '../core/consumer.js';

/**
 * A StreamingPullResponse carrying deliveries, written straight into protobuf's wire format: one buffer
 * sized up front, each payload copied once. Through proto-loader the same response costs an object per
 * message, field and timestamp (`fromObject`) and a writer's list of operations (`encode`), which made
 * encoding the largest cost of delivering on a stream. It reads the stored message itself (its seq is the
 * message id, its publish time a number): a PubsubMessage per delivery, with its Date, id string and
 * attributes copy, was ~40% of what a StreamingPull delivery allocated. Defaults are left out, as proto3
 * encoders do.
 *
 * google.pubsub.v1 field numbers: StreamingPullResponse { received_messages = 1; subscription_properties = 4 },
 * SubscriptionProperties { exactly_once_delivery_enabled = 1; message_ordering_enabled = 2 },
 * ReceivedMessage { ack_id = 1; message = 2; delivery_attempt = 3 }, PubsubMessage { data = 1;
 * attributes = 2 (map entries: key = 1, value = 2); message_id = 3; publish_time = 4; ordering_key = 5 },
 * Timestamp { seconds = 1; nanos = 2 }.
 */
export function encodeDeliveries(batch: readonly StoredDelivery[], properties: { exactlyOnce: boolean; ordering: boolean }): Buffer {
  if (sizes.length < batch.length * SIZES) sizes = new Float64Array(batch.length * SIZES);
  let total = 0;
  for (let i = 0; i < batch.length; i++) total += 1 + lengthPrefixed(measure(batch[i]!, i * SIZES));
  // Always present, even with both false: a client tells an answer about them from no answer by presence.
  const props = (properties.exactlyOnce ? 2 : 0) + (properties.ordering ? 2 : 0);
  total += 2 + props;

  const out = Buffer.allocUnsafe(total);
  let at = 0;
  for (let i = 0; i < batch.length; i++) {
    const r = batch[i]!;
    const m = r.message;
    const s = i * SIZES;
    at = writeTagged(out, at, 0x0a, sizes[s + RECEIVED]!);
    at = writeString(out, at, 0x0a, r.ackId, sizes[s + ACK_ID]!);
    at = writeTagged(out, at, 0x12, sizes[s + MESSAGE]!);
    if (m.data.byteLength) {
      at = writeTagged(out, at, 0x0a, m.data.byteLength);
      out.set(m.data, at);
      at += m.data.byteLength;
    }
    for (const key in m.attributes) {
      const value = m.attributes[key]!;
      const k = Buffer.byteLength(key);
      const v = Buffer.byteLength(value);
      at = writeTagged(out, at, 0x12, stringField(k) + stringField(v));
      at = writeString(out, at, 0x0a, key, k);
      at = writeString(out, at, 0x12, value, v);
    }
    at = writeDecimal(out, at, 0x1a, m.seq, sizes[s + MESSAGE_ID]!);
    const seconds = sizes[s + SECONDS]!;
    const nanos = sizes[s + NANOS]!;
    at = writeTagged(out, at, 0x22, sizes[s + TIMESTAMP]!);
    if (seconds) {
      out[at++] = 0x08;
      at = writeVarint(out, at, seconds);
    }
    if (nanos) {
      out[at++] = 0x10;
      at = writeVarint(out, at, nanos);
    }
    if (m.orderingKey) at = writeString(out, at, 0x2a, m.orderingKey, sizes[s + ORDERING_KEY]!);
    if (r.deliveryAttempt) {
      out[at++] = 0x18;
      at = writeVarint(out, at, r.deliveryAttempt);
    }
  }
  out[at++] = 0x22;
  out[at++] = props;
  if (properties.exactlyOnce) {
    out[at++] = 0x08;
    out[at++] = 1;
  }
  if (properties.ordering) {
    out[at++] = 0x10;
    out[at++] = 1;
  }
  if (at !== total) throw new Error(`StreamingPullResponse encoding wrote ${at} bytes of the ${total} it measured`);
  return out;
}

/**
 * The lengths measured for the writing pass, reused by every call (encoding is synchronous): an array of
 * them per response cost 64 bytes of garbage a delivered message.
 */
let sizes = new Float64Array(0);

/** Per message, in `sizes`: byte lengths of its ack id, message id, ordering key, timestamp, PubsubMessage, ReceivedMessage. */
const ACK_ID = 0;
const MESSAGE_ID = 1;
const ORDERING_KEY = 2;
const TIMESTAMP = 3;
const MESSAGE = 4;
const RECEIVED = 5;
/** And the publish time's Timestamp fields, read once. */
const SECONDS = 6;
const NANOS = 7;
const SIZES = 8;

/** Byte length of one ReceivedMessage; the lengths the writing pass needs go into `sizes` from `s`. */
function measure(r: StoredDelivery, s: number): number {
  const m = r.message;
  const ackId = Buffer.byteLength(r.ackId);
  const messageId = decimalDigits(m.seq);
  const orderingKey = Buffer.byteLength(m.orderingKey);
  const ms = m.publishTime;
  const seconds = Math.floor(ms / 1000);
  const nanos = (ms - seconds * 1000) * 1e6;
  const timestamp = (seconds ? 1 + varintSize(seconds) : 0) + (nanos ? 1 + varintSize(nanos) : 0);
  let message = 1 + lengthPrefixed(timestamp);
  if (m.data.byteLength) message += 1 + lengthPrefixed(m.data.byteLength);
  for (const key in m.attributes)
    message += 1 + lengthPrefixed(stringField(Buffer.byteLength(key)) + stringField(Buffer.byteLength(m.attributes[key]!)));
  message += stringField(messageId);
  if (orderingKey) message += stringField(orderingKey);
  const received = stringField(ackId) + 1 + lengthPrefixed(message) + (r.deliveryAttempt ? 1 + varintSize(r.deliveryAttempt) : 0);
  sizes[s + ACK_ID] = ackId;
  sizes[s + MESSAGE_ID] = messageId;
  sizes[s + ORDERING_KEY] = orderingKey;
  sizes[s + TIMESTAMP] = timestamp;
  sizes[s + MESSAGE] = message;
  sizes[s + RECEIVED] = received;
  sizes[s + SECONDS] = seconds;
  sizes[s + NANOS] = nanos;
  return received;
}

/** A string field's bytes after its tag: length and text (proto3 leaves an empty one out; callers check). */
const stringField = (bytes: number) => 1 + lengthPrefixed(bytes);
const lengthPrefixed = (bytes: number) => varintSize(bytes) + bytes;

/** Bytes of a varint; a negative int64 takes ten (two's complement). */
function varintSize(n: number): number {
  if (n < 0) return 10;
  if (n < 0x80) return 1;
  if (n < 0x4000) return 2;
  let size = 1;
  while (n >= 128) {
    n = Math.floor(n / 128);
    size++;
  }
  return size;
}

function writeVarint(out: Buffer, at: number, n: number): number {
  if (n < 0) {
    let v = BigInt.asUintN(64, BigInt(n));
    for (let i = 0; i < 9; i++, v >>= 7n) out[at++] = Number(v & 0x7fn) | 0x80;
    out[at++] = Number(v);
    return at;
  }
  // Lengths, seconds and nanos fit 31 bits: shifts, not float division.
  if (n <= 0x7fffffff) {
    while (n >= 0x80) {
      out[at++] = (n & 0x7f) | 0x80;
      n >>>= 7;
    }
    out[at++] = n;
    return at;
  }
  while (n >= 128) {
    out[at++] = (n % 128) | 0x80;
    n = Math.floor(n / 128);
  }
  out[at++] = n;
  return at;
}

/** A length-delimited field's tag and length; its `length` bytes follow. */
function writeTagged(out: Buffer, at: number, tag: number, length: number): number {
  out[at++] = tag;
  return writeVarint(out, at, length);
}

/** Digits of a positive integer (a seq) in decimal: the message id's length. */
function decimalDigits(n: number): number {
  let digits = 1;
  while (n >= 10) {
    n = Math.floor(n / 10);
    digits++;
  }
  return digits;
}

/** A positive integer as a string field of its decimal digits, as String(n) reads (n is below 2^53). */
function writeDecimal(out: Buffer, at: number, tag: number, n: number, digits: number): number {
  at = writeTagged(out, at, tag, digits);
  for (let i = at + digits - 1; i >= at; i--) {
    out[i] = 48 + (n % 10);
    n = Math.floor(n / 10);
  }
  return at + digits;
}

function writeString(out: Buffer, at: number, tag: number, s: string, bytes: number): number {
  at = writeTagged(out, at, tag, bytes);
  // As long in UTF-8 as in UTF-16 code units: ASCII. Short ones (ack ids, message ids, most keys) are
  // quicker copied here than through a call into the runtime.
  if (bytes === s.length && bytes <= 64) {
    for (let i = 0; i < bytes; i++) out[at++] = s.charCodeAt(i);
    return at;
  }
  return at + out.write(s, at, bytes, 'utf8');
}
