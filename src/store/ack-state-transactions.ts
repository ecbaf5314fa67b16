/**
 * What reads or rewrites a subscription's acks in bulk — its seeks, a snapshot of it — each one transaction
 * on the store's writer connection (writer-thread.ts): as many acks as it has retained, which took the event
 * loop 800 ms (a seek) and up to 1.1 s (a snapshot) at 200,000 (every other call waiting meanwhile) when
 * they ran on the reading connection.
 */
import type Database from 'better-sqlite3';
import type { RetainedAcks, SnapshotRecord, SnapshotRequest, SnapshotTooOld } from './store.js';

/** Back to a time: what was published from `time` on and is still retained is unacked again. */
export interface SeekToTime {
  kind: 'time';
  sub: string;
  topic: number;
  time: number;
  /** The subscription record's acksRetainedAfter. */
  retainedAfter: number;
  retained: RetainedAcks;
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
    topicSince: bound(request.retained.topicSince),
    subSince: bound(request.retained.subscriptionSince),
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

/**
 * One transaction: the messages published after it are those above the last committed seq; below that,
 * the snapshot holds the subscription's unacked messages within its retention, from the oldest on (its
 * lowSeq is just below it), and copies the subscription's acks above lowSeq.
 */
export function takeSnapshot(db: Database.Database, request: SnapshotRequest): SnapshotRecord | SnapshotTooOld {
  return db.transaction(() => {
    const sub = db.prepare('SELECT low_seq FROM subscriptions WHERE name = ?').pluck().get(request.subscription) as number | undefined;
    if (sub === undefined) throw new Error(`subscription ${request.subscription} is not in the store`);
    const boundary = committedSeq(db);
    const oldest = db
      .prepare(
        `SELECT seq, publish_time FROM messages m
          WHERE m.topic_uid = @topic AND m.seq > @low AND m.seq <= @boundary AND m.publish_time >= @from
            AND NOT EXISTS (SELECT 1 FROM acks a WHERE a.sub = @sub AND a.seq = m.seq)
          ORDER BY m.seq LIMIT 1`,
      )
      .get({ topic: request.topicUid, low: sub, boundary, from: request.expiredBefore, sub: request.subscription }) as
      { seq: number; publish_time: number } | undefined;
    const lowSeq = oldest ? oldest.seq - 1 : boundary;
    const expireTime = (oldest?.publish_time ?? request.now) + request.lifetimeMs;
    if (oldest && expireTime - request.now < request.minLifetimeMs) return { oldestPublishTime: oldest.publish_time };
    const info = db
      .prepare('INSERT INTO snapshots(name, topic_uid, low_seq, expire_time, max_expire_time, labels) VALUES (?, ?, ?, ?, ?, ?)')
      .run(request.name, request.topicUid, lowSeq, expireTime, expireTime, JSON.stringify(request.labels));
    const uid = Number(info.lastInsertRowid);
    db.prepare('INSERT INTO snapshot_acks(snapshot, seq) SELECT ?, seq FROM acks WHERE sub = ? AND seq > ? AND seq <= ?').run(
      uid,
      request.subscription,
      lowSeq,
      boundary,
    );
    return {
      uid,
      name: request.name,
      topicUid: request.topicUid,
      lowSeq,
      expireTime,
      maxExpireTime: expireTime,
      labels: { ...request.labels },
    };
  })();
}

/** The highest seq committed (or compacted away): every message published later has a higher one. */
export function committedSeq(db: Database.Database): number {
  const live = db.prepare('SELECT coalesce(max(seq), 0) FROM messages').pluck().get() as number;
  return Math.max(live, Number(db.prepare("SELECT v FROM meta WHERE k = 'last_seq'").pluck().get() ?? 0));
}
