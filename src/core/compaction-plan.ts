import type { CompactionPlan } from '../store/store.js';

/** What compaction needs to know of a subscription. */
export interface CompactionView {
  name: string;
  topicUid: number;
  retainAckedMessages: boolean;
  /** Seconds. */
  messageRetentionDuration: number;
  /** Lowest seq the subscription may still deliver; undefined if it holds nothing. */
  lowestHeldSeq(): number | undefined;
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
 * Which messages no subscription can be given again: below every subscription's lowest held message
 * (unless one of them retains acked messages for seek, or the message is within the topic's own
 * messageRetentionDuration, which keeps it for seek too), or past the longest retention of the topic and
 * its subscriptions. `fannedOutSeq` bounds it: messages not yet handed to the subscriptions are never dropped;
 * and a live snapshot keeps every message it can still restore (its topic's messages above its lowSeq).
 */
export function compactionPlan(
  subscriptions: Iterable<CompactionView>,
  topics: Iterable<CompactionTopic>,
  fannedOutSeq: number,
  now: number,
  snapshots: Iterable<SnapshotHold> = [],
): CompactionPlan {
  const watermarks = new Map<string, number>();
  const deleteUpTo = new Map<number, number>();
  const deletePublishedBefore = new Map<number, number>();
  const keepPublishedSince = new Map<number, number>();
  const retainAcked = new Set<number>();
  const retention = new Map<number, number>();
  for (const s of subscriptions) {
    const low = s.lowestHeldSeq();
    const mark = low === undefined ? fannedOutSeq : low - 1;
    watermarks.set(s.name, mark);
    deleteUpTo.set(s.topicUid, Math.min(deleteUpTo.get(s.topicUid) ?? Infinity, mark));
    if (s.retainAckedMessages) retainAcked.add(s.topicUid);
    retention.set(s.topicUid, Math.max(retention.get(s.topicUid) ?? 0, s.messageRetentionDuration));
  }
  for (const t of topics) {
    if (!deleteUpTo.has(t.uid)) deleteUpTo.set(t.uid, fannedOutSeq);
    if (t.messageRetentionDuration === undefined) continue;
    keepPublishedSince.set(t.uid, now - t.messageRetentionDuration * 1000);
    retention.set(t.uid, Math.max(retention.get(t.uid) ?? 0, t.messageRetentionDuration));
  }
  for (const uid of retainAcked) deleteUpTo.delete(uid);
  for (const [uid, seconds] of retention) deletePublishedBefore.set(uid, now - seconds * 1000);
  const keepFromSeq = new Map<number, number>();
  for (const s of snapshots) keepFromSeq.set(s.topicUid, Math.min(keepFromSeq.get(s.topicUid) ?? Infinity, s.lowSeq + 1));
  return { watermarks, deleteUpTo, deletePublishedBefore, keepFromSeq, keepPublishedSince };
}
