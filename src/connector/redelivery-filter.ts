import type { PubsubMessage } from '../core/message.js';
import type { SubscriptionSpec } from '../core/subscription-config.js';
import { CommittedRanges } from './committed-ranges.js';
import type { ExportMessage } from './connector.js';

/**
 * How a sink recognises a message a redelivery brings again:
 * - `sequence`: by its ordering key and per-key sequence. Only where the source numbers each key's
 *   messages (the embedded core; `sequence` from 1) and the subscription delivers a key in order.
 * - `id`: by its message id — messages without an ordering key, keyed messages of an unordered
 *   subscription, and every message of a source without per-key sequences (a remote Pub/Sub, whose
 *   messages come with `sequence` 0). Ids are remembered until the message is past the subscription's
 *   `messageRetentionDuration`: no redelivery, not even a seek, can bring it after that.
 */
export type RedeliveryMark = { by: 'sequence'; key: string; sequence: number } | { by: 'id'; id: string };

export function redeliveryMark(m: PubsubMessage, ordered: boolean): RedeliveryMark {
  if (ordered && m.orderingKey !== '' && m.sequence > 0) return { by: 'sequence', key: m.orderingKey, sequence: m.sequence };
  return { by: 'id', id: m.messageId };
}

/** Ids written before this time (ms) can be forgotten: their messages are past the subscription's retention. */
export function retentionCutoff(spec: Pick<SubscriptionSpec, 'messageRetentionDuration'>, now: number): number {
  return now - spec.messageRetentionDuration * 1000;
}

/** Where a sink keeps the ids of what it wrote (in memory from its manifest, or in its own table). */
export interface WrittenIds {
  /** Of `ids`, those written and not yet forgotten. */
  find(ids: string[]): Promise<Set<string>> | Set<string>;
}

/** Ids in memory, each with the time (ms) it was written; `forgetBefore` drops those past retention. */
export class RememberedIds implements WrittenIds {
  private readonly ids = new Map<string, number>();

  add(id: string, at: number): void {
    this.ids.set(id, at);
  }

  find(ids: string[]): Set<string> {
    return new Set(ids.filter((id) => this.ids.has(id)));
  }

  has(id: string): boolean {
    return this.ids.has(id);
  }

  forgetBefore(cutoff: number): void {
    for (const [id, at] of this.ids) if (at < cutoff) this.ids.delete(id);
  }
}

/**
 * The "already written" check both built-in writers share: per ordering key, the sequence ranges the
 * sink holds; otherwise the ids it holds (see RedeliveryMark). A delivery it finds is reported written
 * without being written again, so a redelivery after a crash (the sink committed, the ack was lost)
 * leaves one copy. Ranges, not a high-water mark: an earlier file can fail after a later one of the same
 * key committed, and its messages, coming again, lie below the highest committed sequence unwritten.
 */
export class RedeliveryFilter {
  constructor(
    private readonly ids: WrittenIds,
    /** The subscription delivers each key in order (enableMessageOrdering). */
    private readonly ordered: boolean,
    /** The sequence ranges the sink holds: its own, when the sink keeps them for itself too. */
    private readonly ranges = new CommittedRanges(),
  ) {}

  mark(m: PubsubMessage): RedeliveryMark {
    return redeliveryMark(m, this.ordered);
  }

  /** The sink holds sequences `first`..`last` of `key`. */
  addRange(key: string, first: number, last: number): void {
    this.ranges.add(key, first, last);
  }

  /** The ids of `batch` deliveries the sink already holds. */
  async written(batch: ExportMessage[]): Promise<Set<string>> {
    const byId: ExportMessage[] = [];
    const found = new Set<string>();
    for (const em of batch) {
      const mark = this.mark(em.message);
      if (mark.by === 'id') byId.push(em);
      else if (this.ranges.has(mark.key, mark.sequence)) found.add(em.id);
    }
    if (byId.length) {
      const held = await this.ids.find([...new Set(byId.map((em) => em.message.messageId))]);
      for (const em of byId) if (held.has(em.message.messageId)) found.add(em.id);
    }
    return found;
  }
}
