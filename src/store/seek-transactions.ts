/**
 * The two seeks of a subscription, each one transaction on the store's writer connection (writer-thread.ts):
 * they rewrite a subscription's acks, as many as it has retained, which took the event loop 800 ms at
 * 200,000 retained acks (every other call waiting meanwhile) when they ran on the reading connection.
 */
import type Database from 'better-sqlite3';

/** Back to a time: what was published from `time` on and is still retained is unacked again. */
export interface SeekToTime {
  kind: 'time';
  sub: string;
  topic: number;
  time: number;
  /** The subscription record's acksRetainedAfter. */
  retainedAfter: number;
  /** RetainedAcks (store.ts); Infinity: no such retention. */
  topicSince: number;
  subscriptionSince: number;
}

/** To a snapshot: the subscription's acks become the snapshot's. */
export interface SeekToSnapshot {
  kind: 'snapshot';
  sub: string;
  snapshot: number;
}

export type SeekRequest = SeekToTime | SeekToSnapshot;

/** The seq the subscription's backlog is read again from (its new watermark); undefined: the snapshot is gone. */
export function runSeek(db: Database.Database, request: SeekRequest): number | undefined {
  return db.transaction(() => (request.kind === 'time' ? seekToTime(db, request) : seekToSnapshot(db, request)))();
}

function seekToSnapshot(db: Database.Database, { sub, snapshot }: SeekToSnapshot): number | undefined {
  const low = db.prepare('SELECT low_seq FROM snapshots WHERE uid = ?').pluck().get(snapshot) as number | undefined;
  if (low === undefined) return undefined;
  db.prepare('DELETE FROM acks WHERE sub = ?').run(sub);
  db.prepare('INSERT INTO acks(sub, seq) SELECT ?, seq FROM snapshot_acks WHERE snapshot = ?').run(sub, snapshot);
  db.prepare('DELETE FROM failures WHERE sub = ?').run(sub);
  db.prepare('UPDATE subscriptions SET low_seq = ? WHERE name = ?').run(low, sub);
  return low;
}

function seekToTime(db: Database.Database, request: SeekToTime): number {
  const { sub, topic, time } = request;
  const bound = (t: number) => Math.min(t, Number.MAX_SAFE_INTEGER);
  const params = {
    sub,
    topic,
    topicSince: bound(request.topicSince),
    subSince: bound(request.subscriptionSince),
    retainedAfter: request.retainedAfter,
  };
  // An acked message neither retention keeps is gone for the subscription, though its row may be kept
  // for another subscription or a snapshot: it stays acked.
  const kept = '(publish_time >= @topicSince OR (publish_time >= @subSince AND seq > @retainedAfter))';
  const before = db
    .prepare('SELECT coalesce(max(seq), 0) FROM messages WHERE topic_uid = ? AND publish_time < ?')
    .pluck()
    .get(topic, time) as number;
  // Below the watermark every message is acked, so the watermark goes back no further than the first
  // retained one (publish times rise with seqs)...
  const watermark = db.prepare('SELECT low_seq FROM subscriptions WHERE name = ?').pluck().get(sub) as number;
  const unretained = db
    .prepare(`SELECT coalesce(max(seq), 0) FROM messages WHERE topic_uid = @topic AND seq <= @watermark AND NOT ${kept}`)
    .pluck()
    .get({ ...params, watermark }) as number;
  const low = Math.max(before, Math.min(unretained, watermark));
  // ...and one out of that order (a clock set back, a retention begun later) keeps its ack as a row.
  db.prepare(
    `INSERT OR IGNORE INTO acks(sub, seq) SELECT @sub, seq FROM messages
       WHERE topic_uid = @topic AND seq > @low AND seq <= @watermark AND NOT ${kept}`,
  ).run({ ...params, low, watermark });
  db.prepare(
    `DELETE FROM acks WHERE sub = @sub AND seq > @low
       AND seq IN (SELECT seq FROM messages WHERE topic_uid = @topic AND seq > @low AND ${kept})`,
  ).run({ ...params, low });
  db.prepare('DELETE FROM failures WHERE sub = ? AND seq > ?').run(sub, low);
  db.prepare('UPDATE subscriptions SET low_seq = ? WHERE name = ?').run(low, sub);
  return low;
}
