import type { CompactionPlan, TopicCompaction } from '../store/store.js';

/** What compaction needs to know of a subscription. */
export interface CompactionView {
  name: string;
  topicUid: number;
  retainAckedMessages: boolean;
  /** Seconds. */
  messageRetentionDuration: number;
  /** Lowest seq the subscription may still deliver; undefined if it holds nothing. */
  lowestHeldSeq(): number | undefined;
  /**
   * Publish time before which the messages it has not read are out of its backlog count. Retention deletes
   * nothing later for it: a row deleted before its expiry passed it would stay counted (and keep the oldest
   * age) until the subscription read that far or restarted.
   */
  expiredBefore: number;
}

/** What compaction needs to know of a topic. */
export interface CompactionTopic {
  uid: number;
  /** The topic's own retention in seconds, if it has one. */
  messageRetentionDuration?: number;
}

/** What compaction needs to know of a live snapshot: it holds its topic's messages above lowSeq. */
export interface SnapshotHold {
  topicUid: number;
  lowSeq: number;
}

/**
 * Which messages no subscription can be given again. A subscription still needs a message above its
 * lowest held one (any acked one too if it retains acked messages for seek) unless the message is past
 * that subscription's own messageRetentionDuration: one nobody reads stops holding messages once they
 * expire for it, as in Pub/Sub, however long the other subscriptions of the topic keep theirs. The topic's
 * own messageRetentionDuration keeps its recent messages for seek, acked or not. `fannedOutSeq` bounds it:
 * messages not yet handed to the subscriptions are never dropped; and a live snapshot keeps every message it
 * can still restore (its topic's messages above its lowSeq).
 */
export function compactionPlan(
  subscriptions: Iterable<CompactionView>,
  topics: Iterable<CompactionTopic>,
  fannedOutSeq: number,
  now: number,
  snapshots: Iterable<SnapshotHold> = [],
): CompactionPlan {
  const watermarks = new Map<string, number>();
  const byTopic = new Map<number, TopicCompaction>();
  const topicOf = (uid: number) => {
    const t = byTopic.get(uid) ?? { upTo: fannedOutSeq, publishedBefore: Number.MAX_SAFE_INTEGER, needs: [] };
    byTopic.set(uid, t);
    return t;
  };
  for (const s of subscriptions) {
    const low = s.lowestHeldSeq();
    const mark = low === undefined ? fannedOutSeq : low - 1;
    watermarks.set(s.name, mark);
    topicOf(s.topicUid).needs.push([s.retainAckedMessages ? 0 : mark, Math.min(now - s.messageRetentionDuration * 1000, s.expiredBefore)]);
  }
  for (const t of topics) {
    const plan = topicOf(t.uid);
    if (t.messageRetentionDuration !== undefined) plan.publishedBefore = now - t.messageRetentionDuration * 1000;
  }
  for (const plan of byTopic.values()) plan.needs = fewestNeeds(plan.needs);
  const keepFromSeq = new Map<number, number>();
  for (const s of snapshots) keepFromSeq.set(s.topicUid, Math.min(keepFromSeq.get(s.topicUid) ?? Infinity, s.lowSeq + 1));
  return { watermarks, topics: byTopic, keepFromSeq };
}

/** Conditions per topic in compaction's query at most: SQLite refuses an expression deeper than 1000. */
const MAX_NEEDS = 64;

/**
 * The same needs in as few conditions: one that another keeps entirely (after an earlier seq, from an
 * earlier time) goes; past MAX_NEEDS, the latest fold into one keeping what each of them kept (and
 * possibly more: compaction then deletes less, never something still needed).
 */
function fewestNeeds(needs: [afterSeq: number, since: number][]): [afterSeq: number, since: number][] {
  const front: [number, number][] = [];
  for (const need of [...needs].sort((a, b) => a[1] - b[1] || a[0] - b[0]))
    if (!front.length || need[0] < front[front.length - 1]![0]) front.push(need);
  if (front.length <= MAX_NEEDS) return front;
  const rest = front.splice(MAX_NEEDS - 1);
  front.push([rest[rest.length - 1]![0], rest[0]![1]]);
  return front;
}
