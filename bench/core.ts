/**
 * Core throughput: publish, and publish -> delivered -> acked, for 1 KB messages over 10,000 ordering
 * keys, each as a ratio against raw SQLite inserts of the same rows (same pragmas) in the same run.
 */
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { PubSubCore } from '../src/core/pubsub-core.js';
import { SqliteStore } from '../src/store/sqlite-store.js';
import { tempDir } from '../test/helpers/temp-dir.js';
import { best, ratioTable, time, warm, type BenchOutput } from './report.js';
import { ackAll } from './workload.js';

const MESSAGES = Number(process.env.BENCH_MESSAGES ?? 50_000);
const KEYS = 10_000;
const PAYLOAD = Buffer.alloc(1024, 'x');

function rows(): { key: string; data: Buffer }[] {
  return Array.from({ length: MESSAGES }, (_, i) => ({ key: `key-${i % KEYS}`, data: PAYLOAD }));
}

async function rawSqlite(): Promise<number> {
  const dir = tempDir('orderly-bench-');
  try {
    const db = new Database(join(dir.path, 'raw.sqlite'));
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.pragma('wal_autocheckpoint = 0'); // as the store, whose checkpoints run on a worker thread
    db.exec('CREATE TABLE messages(seq INTEGER PRIMARY KEY, ordering_key TEXT, key_seq INTEGER, publish_time INTEGER, data BLOB)');
    const insert = db.prepare('INSERT INTO messages VALUES (?, ?, ?, ?, ?)');
    const all = rows();
    const seconds = await time(async () => {
      // Same batching as the core's publishes below: one transaction per 1000 rows.
      for (let i = 0; i < all.length; i += 1000) {
        db.transaction(() => {
          for (let j = i; j < Math.min(i + 1000, all.length); j++) insert.run(j + 1, all[j]!.key, 1, Date.now(), all[j]!.data);
        })();
      }
    });
    db.close();
    return MESSAGES / seconds;
  } finally {
    dir.remove();
  }
}

async function withCore<T>(fn: (core: PubSubCore) => Promise<T>): Promise<T> {
  const dir = tempDir('orderly-bench-');
  const core = await PubSubCore.open({ store: SqliteStore.open(dir.path), tickMs: 50 });
  try {
    await core.createTopic('bench');
    return await fn(core);
  } finally {
    await core.close();
    dir.remove();
  }
}

async function publishAll(core: PubSubCore): Promise<void> {
  const all = rows();
  // 1000-message publish requests, up to 4 in flight (like a client's batching publisher).
  const inflight: Promise<unknown>[] = [];
  for (let i = 0; i < all.length; i += 1000) {
    inflight.push(
      core.publish(
        'bench',
        all.slice(i, i + 1000).map((r) => ({ data: r.data, orderingKey: r.key })),
      ),
    );
    if (inflight.length >= 4) await inflight.shift();
  }
  await Promise.all(inflight);
}

export async function benchCore(): Promise<BenchOutput> {
  const baseline = await best(rawSqlite);
  const publish = await warm(() =>
    withCore(async (core) => {
      await core.createSubscription('bench-sub', { topic: 'bench', enableMessageOrdering: true });
      return MESSAGES / (await time(() => publishAll(core)));
    }),
  );
  const endToEnd = await warm(() =>
    withCore(async (core) => {
      await core.createSubscription('bench-sub', { topic: 'bench', enableMessageOrdering: true });
      const { finished, subscriber } = ackAll(core, 'bench-sub', MESSAGES, { flowControl: { maxMessages: 5000 } });
      const seconds = await time(async () => {
        await publishAll(core);
        await finished;
      });
      await subscriber.close();
      return MESSAGES / seconds;
    }),
  );
  return ratioTable([
    { name: 'raw SQLite insert (baseline: warm, best of runs)', perSecond: baseline, baseline },
    { name: 'core publish (ordered sub, 10k keys)', perSecond: publish, baseline },
    { name: 'core publish -> callback -> ack', perSecond: endToEnd, baseline },
  ]);
}
