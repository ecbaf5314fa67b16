/**
 * The stores' writer thread (one per process; see store-writer.ts). For each open store it holds a write
 * connection and applies the main thread's grouped writes (messages, acks, failure counts); the write
 * requests that queue up while a commit syncs are committed together, in one transaction (one sync), on
 * the thread's next turn. Neither the inserts nor the commit's sync run on the event loop, and a burst of
 * small publishes costs one sync per commit round, not one per request. The WAL checkpoints run here too,
 * between commits, where the next commit finds the WAL fully copied and restarts it. (Checkpoints on a
 * connection of their own, concurrent with the commits, let the WAL grow: in the memory benchmark a
 * drained 1M backlog's store grew to 4.4 GB during compaction instead of shrinking.)
 */
import Database from 'better-sqlite3';
import { parentPort as parent } from 'node:worker_threads';
import { runSeek, takeSnapshot } from './ack-state-transactions.js';
import type { PackedRow, ThreadRequest, ThreadReply, WirePlan } from './store-writer.js';

if (!parent) throw new Error('writer-thread.ts runs as a worker thread of store-writer.ts');
const parentPort = parent;

interface OpenStore {
  db: Database.Database;
  /** Applies the writes in one transaction; a write that fails is rolled back alone and its error recorded. */
  commit: (writes: QueuedWrite[], failed: Map<number, Failure>) => void;
}

type QueuedWrite = Extract<ThreadRequest, { op: 'write' }>;
/** Why a write failed: SQLite's message and its code (SQLITE_FULL: the disk is full), as the reply carries them. */
type Failure = Pick<ThreadReply, 'error' | 'code'>;

const CHECKPOINT_EVERY_MS = 200;
const stores = new Map<number, OpenStore>();

function open({ store, file, synchronous }: { store: number; file: string; synchronous: string }): void {
  // The whole file is checked meanwhile on a thread of its own (store-check.ts).
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${synchronous}`);
  db.pragma('busy_timeout = 10000');
  db.pragma('wal_autocheckpoint = 0');
  // Each write request runs in a savepoint (`apply`), which copies every page it changes to a statement journal
  // first: in memory, not a temporary file (a write and a page copy through the kernel per page, per request).
  db.pragma('temp_store = MEMORY');
  // After a checkpoint lets the WAL restart, a WAL left larger than this is truncated back (by the writer).
  db.pragma('journal_size_limit = 67108864');
  const insertMessage = db.prepare(
    'INSERT INTO messages(seq, topic_uid, ordering_key, key_seq, publish_time, data, attributes) VALUES (?, ?, ?, ?, ?, ?, ?)',
  );
  // A request's acks of one subscription in one statement: a statement per ack cost twice as much (the call,
  // and the subscription's name bound and converted again for every row).
  const insertAcks = db.prepare('INSERT OR IGNORE INTO acks(sub, seq) SELECT ?, value FROM json_each(?)');
  const upsertFailures = db.prepare(
    'INSERT INTO failures(sub, seq, n) VALUES (?, ?, ?) ON CONFLICT(sub, seq) DO UPDATE SET n = excluded.n',
  );
  // Rows arrive as one JSON string of tuples, payloads back to back in one transferred buffer, in row
  // order (store-writer.ts `pack`).
  // Nested in `commit`'s transaction, each write runs in a savepoint of its own.
  const apply = db.transaction((rows: string, payloads: ArrayBuffer) => {
    let offset = 0;
    for (const r of JSON.parse(rows) as PackedRow[]) {
      if (r[0] === 'm') {
        const data = Buffer.from(payloads, offset, r[6]);
        offset += r[6];
        insertMessage.run(r[1], r[2], r[3], r[4], r[5], data, r[7]);
      } else if (r[0] === 'a') {
        insertAcks.run(r[1], JSON.stringify(r[2]));
      } else {
        upsertFailures.run(r[1], r[2], r[3]);
      }
    }
  });
  const commit = db.transaction((writes: QueuedWrite[], failed: Map<number, Failure>) => {
    for (const w of writes) {
      try {
        apply(w.rows, w.payloads);
      } catch (e) {
        // SQLite rolled the whole transaction back (I/O error, disk full): the group fails as a whole; the
        // writes after this one must not go on outside a transaction.
        if (!db.inTransaction) throw e;
        failed.set(w.id, failure(e));
      }
    }
  });
  stores.set(store, { db, commit });
}

/** Write requests received since the last commit, in arrival order. */
let queued: QueuedWrite[] = [];
let commitScheduled = false;
/** Payload bytes per group commit: bounds one transaction when a long queue built up. */
const MAX_GROUP_BYTES = 64 * 1024 * 1024;

/**
 * Commits what queued up, per store, in one transaction each, and answers each request: after the commit,
 * or with its own error if it alone failed (or the commit's error).
 */
function commitQueued(): void {
  commitScheduled = false;
  let bytes = 0;
  let n = 0;
  while (n < queued.length && (n === 0 || bytes + queued[n]!.payloads.byteLength <= MAX_GROUP_BYTES))
    bytes += queued[n++]!.payloads.byteLength;
  const group = queued.slice(0, n);
  queued = queued.slice(n);
  if (queued.length) scheduleCommit();
  const byStore = new Map<number, QueuedWrite[]>();
  for (const w of group) {
    const list = byStore.get(w.store);
    if (list) list.push(w);
    else byStore.set(w.store, [w]);
  }
  for (const [store, writes] of byStore) {
    const failed = new Map<number, Failure>();
    try {
      const s = stores.get(store);
      if (!s) throw new Error('the store is closed');
      s.commit(writes, failed);
    } catch (e) {
      for (const w of writes) failed.set(w.id, failure(e));
    }
    for (const { id } of writes) parentPort.postMessage({ id, ...failed.get(id) } satisfies ThreadReply);
  }
}

function scheduleCommit(): void {
  if (commitScheduled) return;
  commitScheduled = true;
  // The port hands over every message that arrived meanwhile before the immediate runs: they join the group.
  setImmediate(commitQueued);
}

function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function failure(e: unknown): Failure {
  const code = (e as { code?: unknown } | undefined)?.code;
  return { error: errorMessage(e), code: typeof code === 'string' ? code : undefined };
}

/** Rows deleted per transaction: small enough that group commits of publishes and acks slot in between. */
const CHUNK = 2000;
/** Pages given back per incremental-vacuum step. */
const VACUUM_PAGES = 512;
const yieldToMessages = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Carries out a compaction plan (store.ts CompactionPlan) in chunks, yielding between them so writes
 * queued meanwhile are applied (and acknowledged) without waiting for the whole compaction. Keys whose
 * messages are deleted keep their last sequence in key_seqs, until their topic is deleted. Then freed pages
 * go back to the file system.
 */
async function compact(store: number, plan: WirePlan): Promise<number> {
  const live = () => stores.get(store);
  const run = <T>(fn: () => T): T => {
    const s = live();
    if (!s) throw new Error('the store is closed');
    return s.db.transaction(fn)();
  };
  const orphaned = run(() => {
    const db = live()!.db;
    // The seq counter must not go backwards once the newest message is compacted away.
    const last = db.prepare('SELECT coalesce(max(seq), 0) FROM messages').pluck().get() as number;
    const saved = Number(db.prepare("SELECT v FROM meta WHERE k = 'last_seq'").pluck().get() ?? 0);
    if (last > saved)
      db.prepare("INSERT INTO meta(k, v) VALUES ('last_seq', ?) ON CONFLICT(k) DO UPDATE SET v = excluded.v").run(String(last));
    for (const [name, low] of plan.watermarks)
      db.prepare('UPDATE subscriptions SET low_seq = max(low_seq, ?) WHERE name = ?').run(low, name);
    return orphanedTopics(db);
  });
  for (const [name, low] of plan.watermarks) {
    for (const table of ['acks', 'failures']) {
      const sql = `DELETE FROM ${table} WHERE sub = ? AND seq IN (SELECT seq FROM ${table} WHERE sub = ? AND seq <= ? LIMIT ${CHUNK})`;
      while (run(() => live()!.db.prepare(sql).run(name, name, low).changes) > 0) {
        await yieldToMessages();
      }
    }
  }
  let deleted = 0;
  const deleteChunk = (where: string, params: (string | number)[]) =>
    run(() => {
      const db = live()!.db;
      const seqs = db
        .prepare(`SELECT seq FROM messages WHERE ${where} ORDER BY seq LIMIT ${CHUNK}`)
        .pluck()
        .all(...params) as number[];
      if (!seqs.length) return 0;
      const from = seqs[0];
      const to = seqs[seqs.length - 1];
      const range = `(${where}) AND seq BETWEEN ? AND ?`;
      db.prepare(
        `INSERT INTO key_seqs(topic_uid, ordering_key, last)
           SELECT topic_uid, ordering_key, max(key_seq) FROM messages WHERE ${range} GROUP BY topic_uid, ordering_key
         ON CONFLICT(topic_uid, ordering_key) DO UPDATE SET last = max(last, excluded.last)`,
      ).run(...params, from, to);
      return db.prepare(`DELETE FROM messages WHERE ${range}`).run(...params, from, to).changes;
    });
  // What a live snapshot holds stays, whatever the acks or the retention say.
  const keepFrom = new Map(plan.keepFromSeq);
  const everything = { upTo: Number.MAX_SAFE_INTEGER, publishedBefore: Number.MAX_SAFE_INTEGER, needs: [] };
  for (const [uid, { upTo, publishedBefore, needs }] of [...plan.topics, ...orphaned.map((uid) => [uid, everything] as const)]) {
    const unneeded = needs.map(() => ' AND (seq <= ? OR publish_time < ?)').join('');
    const params = [uid, upTo, keepFrom.get(uid) ?? Number.MAX_SAFE_INTEGER, publishedBefore, ...needs.flat()];
    for (let n: number; (n = deleteChunk(`topic_uid = ? AND seq <= ? AND seq < ? AND publish_time < ?${unneeded}`, params)) > 0;) {
      deleted += n;
      await yieldToMessages();
    }
  }
  // A deleted topic's key sequences (one row per key it had) serve no publish again: its uid is never reused.
  const deleteKeys = `DELETE FROM key_seqs WHERE topic_uid = ? AND ordering_key IN (SELECT ordering_key FROM key_seqs WHERE topic_uid = ? LIMIT ${CHUNK})`;
  for (const uid of run(() => deletedTopicsIn(live()!.db, 'key_seqs'))) {
    while (run(() => live()!.db.prepare(deleteKeys).run(uid, uid).changes) > 0) await yieldToMessages();
  }
  // Stores created before incremental vacuum (auto_vacuum NONE) have no free-page map to give back.
  for (
    let s = live();
    s && s.db.pragma('auto_vacuum', { simple: true }) === 2 && (s.db.pragma('freelist_count', { simple: true }) as number) > 0;
    s = live()
  ) {
    s.db.pragma(`incremental_vacuum(${VACUUM_PAGES})`);
    await yieldToMessages();
  }
  return deleted;
}

/**
 * Deleted topics whose messages nothing can be given again: no subscription (a deleted topic's keep their
 * backlog) and no snapshot refers to them. No plan names such a topic (the core plans for its live topics
 * and its subscriptions' ones), so without this their messages stayed in the store for good. One index
 * step per topic that has messages.
 */
function orphanedTopics(db: Database.Database): number[] {
  return topicsIn(
    db,
    'messages',
    `EXISTS (SELECT 1 FROM topics WHERE uid = @uid) OR EXISTS (SELECT 1 FROM subscriptions WHERE topic_uid = @uid)
       OR EXISTS (SELECT 1 FROM snapshots WHERE topic_uid = @uid)`,
  );
}

/** Deleted topics that have rows in `table`. */
function deletedTopicsIn(db: Database.Database, table: 'key_seqs'): number[] {
  return topicsIn(db, table, 'EXISTS (SELECT 1 FROM topics WHERE uid = @uid)');
}

/** The topic uids of `table`'s rows (its index leads with topic_uid: one step per topic) that `referenced` is false for. */
function topicsIn(db: Database.Database, table: 'messages' | 'key_seqs', referenced: string): number[] {
  const next = db.prepare(`SELECT min(topic_uid) FROM ${table} WHERE topic_uid > ?`).pluck();
  const isReferenced = db.prepare(`SELECT ${referenced}`).pluck();
  const found: number[] = [];
  for (let uid = next.get(-1) as number | null; uid !== null; uid = next.get(uid) as number | null)
    if (!isReferenced.get({ uid })) found.push(uid);
  return found;
}

parentPort.on('message', (msg: ThreadRequest) => {
  if (msg.op === 'write') {
    queued.push(msg);
    scheduleCommit();
    return;
  }
  // Every other request comes after the writes sent before it.
  while (queued.length) commitQueued();
  const reply: ThreadReply = { id: msg.id };
  if (msg.op === 'compact') {
    compact(msg.store, msg.plan).then(
      (result) => parentPort.postMessage({ ...reply, result }),
      (e) => parentPort.postMessage({ ...reply, ...failure(e) }),
    );
    return;
  }
  try {
    if (msg.op === 'open') open(msg);
    else if (msg.op === 'seek' || msg.op === 'snapshot') {
      const s = stores.get(msg.store);
      if (!s) throw new Error('the store is closed');
      reply.result = msg.op === 'seek' ? runSeek(s.db, msg.request) : takeSnapshot(s.db, msg.request);
    } else if (msg.op === 'close') {
      stores.get(msg.store)?.db.close();
      stores.delete(msg.store);
    }
  } catch (e) {
    reply.error = errorMessage(e);
  }
  parentPort.postMessage(reply);
});

setInterval(() => {
  for (const { db } of stores.values()) {
    try {
      db.pragma('wal_checkpoint(PASSIVE)');
    } catch {
      // Busy: the next round retries.
    }
  }
}, CHECKPOINT_EVERY_MS).unref();
