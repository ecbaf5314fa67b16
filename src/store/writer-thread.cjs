'use strict';
/**
 * The stores' writer thread (one per process; see store-writer.ts). For each open store it holds a write
 * connection, applies the main thread's grouped writes (messages, acks, failure counts) in one transaction
 * per group, and runs the WAL checkpoints, so neither the inserts, the commit's sync nor the checkpoint
 * copy runs on the event loop. Plain CommonJS: a worker loads it without the TypeScript loader.
 */
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.sqlite);

const CHECKPOINT_EVERY_MS = 200;
const stores = new Map();

function open({ store, file, synchronous }) {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${synchronous}`);
  db.pragma('busy_timeout = 10000');
  db.pragma('wal_autocheckpoint = 0');
  // After a checkpoint lets the WAL restart, a WAL left larger than this is truncated back.
  db.pragma('journal_size_limit = 67108864');
  const insertMessage = db.prepare(
    'INSERT INTO messages(seq, topic_uid, ordering_key, key_seq, publish_time, data, attributes) VALUES (?, ?, ?, ?, ?, ?, ?)',
  );
  const insertAck = db.prepare('INSERT OR IGNORE INTO acks(sub, seq) VALUES (?, ?)');
  const upsertFailures = db.prepare('INSERT INTO failures(sub, seq, n) VALUES (?, ?, ?) ON CONFLICT(sub, seq) DO UPDATE SET n = excluded.n');
  // Payloads arrive back to back in one transferred buffer, in message order (store-writer.ts `pack`).
  const apply = db.transaction((writes, payloads) => {
    let offset = 0;
    for (const w of writes) {
      if (w.kind === 'append') {
        for (const m of w.messages) {
          const attrs = Object.keys(m.attributes).length ? JSON.stringify(m.attributes) : null;
          const data = Buffer.from(payloads, offset, m.dataBytes);
          offset += m.dataBytes;
          insertMessage.run(m.seq, m.topicUid, m.orderingKey, m.keySeq, m.publishTime, data, attrs);
        }
      } else if (w.kind === 'ack') {
        for (const seq of w.seqs) insertAck.run(w.subscription, seq);
      } else {
        upsertFailures.run(w.subscription, w.seq, w.failures);
      }
    }
  });
  stores.set(store, { db, apply });
}

parentPort.on('message', (msg) => {
  const reply = { id: msg.id };
  try {
    if (msg.op === 'open') open(msg);
    else if (msg.op === 'write') {
      const store = stores.get(msg.store);
      if (!store) throw new Error('the store is closed');
      store.apply(msg.writes, msg.payloads);
    }
    else if (msg.op === 'close') {
      stores.get(msg.store)?.db.close();
      stores.delete(msg.store);
    }
  } catch (e) {
    reply.error = e instanceof Error ? e.message : String(e);
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
