/**
 * Child process of the memory benchmark's callback drain: watches a store file through its own read-only
 * SQLite connection (WAL readers see each committed transaction) and reports when the first ack of a
 * subscription became durable. A separate process, so it neither adds to the drain's memory nor waits on
 * the drain's event loop. Also answers `count` requests: how many messages are durably acked so far.
 */
import Database from 'better-sqlite3';
import { exitWithParent, reply } from './child.js';

export type ProbeMessage = { ready: true } | { firstAckAt: number } | { count: number };

const [file, subscription] = process.argv.slice(2);
const db = new Database(file, { readonly: true, fileMustExist: true });
// The store's schema (src/store/sqlite-store.ts): one row per durable ack, except that compaction folds the
// acks up to a subscription's low_seq into that watermark. The backlog's seqs run 1..N (one topic, published
// after the subscription was created at low_seq 0), so acked = low_seq + acks above it. A changed schema
// fails loudly here.
const anyAcked = db
  .prepare('SELECT s.low_seq > 0 OR EXISTS (SELECT 1 FROM acks a WHERE a.sub = s.name) FROM subscriptions s WHERE s.name = ?')
  .pluck();
const countAcked = db
  .prepare(
    'SELECT s.low_seq + (SELECT count(*) FROM acks a WHERE a.sub = s.name AND a.seq > s.low_seq) FROM subscriptions s WHERE s.name = ?',
  )
  .pluck();

process.on('message', (m: string) => {
  if (m === 'count') void reply({ count: countAcked.get(subscription) as number });
  if (m === 'stop') {
    db.close();
    process.exit(0);
  }
});
exitWithParent();

await reply({ ready: true });
const poll = setInterval(() => {
  if (anyAcked.get(subscription) !== 1) return;
  clearInterval(poll);
  void reply({ firstAckAt: Date.now() });
}, 2);
