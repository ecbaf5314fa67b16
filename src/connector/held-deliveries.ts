import { messageSize, type ReceivedMessage } from '../core/message.js';

/**
 * Starts the id of a delivery held beside another delivery of the same message (a copy); no other id
 * begins with it.
 */
const COPY = '\u0000';

/**
 * The deliveries an export runner holds, under the id its connector knows each by (ExportMessage.id): the
 * message's id, or, for a copy of a message held already, COPY and the copy's ack id. One Map keyed so
 * answers both "which delivery did the connector mean" and "is this message held already" (a redelivery):
 * with a Map per question (ack id, message id) the main thread spent 0.95 s of CPU per 50,000-message text
 * export against 0.86 s with one (12 alternated pairs on a shared machine; docs/benchmarks.md, stop 50).
 */
export class HeldDeliveries {
  private readonly byId = new Map<string, ReceivedMessage>();
  /** Per message with a delivery held under a copy id: how many of its deliveries are held in all. */
  private readonly copies = new Map<string, number>();
  /** Payload bytes held (messageSize). */
  bytes = 0;

  get size(): number {
    return this.byId.size;
  }

  /** Holds a delivery; true when another delivery of its message is held already. */
  add(m: ReceivedMessage): boolean {
    const messageId = m.message.messageId;
    const held = this.count(messageId);
    if (held === 0 && !messageId.startsWith(COPY)) this.byId.set(messageId, m);
    else {
      this.byId.set(COPY + m.ackId, m);
      this.copies.set(messageId, held + 1);
    }
    this.bytes += messageSize(m.message);
    return held > 0;
  }

  /** How many deliveries of the message are held. */
  count(messageId: string): number {
    return this.copies.get(messageId) ?? (!messageId.startsWith(COPY) && this.byId.has(messageId) ? 1 : 0);
  }

  /** The id the connector knows a held delivery by. */
  idOf(m: ReceivedMessage): string {
    const messageId = m.message.messageId;
    return this.byId.get(messageId) === m ? messageId : COPY + m.ackId;
  }

  get(id: string): ReceivedMessage | undefined {
    return this.byId.get(id);
  }

  has(id: string): boolean {
    return this.byId.has(id);
  }

  /** Forgets a held delivery; returns it, or undefined if it was not held (settled already). */
  release(id: string): ReceivedMessage | undefined {
    const m = this.byId.get(id);
    if (!m) return undefined;
    this.byId.delete(id);
    this.bytes -= messageSize(m.message);
    const messageId = m.message.messageId;
    const held = this.copies.get(messageId);
    if (held !== undefined) {
      const underMessageId = !messageId.startsWith(COPY) && this.byId.has(messageId) ? 1 : 0;
      if (held - 1 > underMessageId) this.copies.set(messageId, held - 1);
      else this.copies.delete(messageId);
    }
    return m;
  }

  values(): IterableIterator<ReceivedMessage> {
    return this.byId.values();
  }

  clear(): void {
    this.byId.clear();
    this.copies.clear();
    this.bytes = 0;
  }
}
