import Database from 'better-sqlite3';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, realpathSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { durableRename, syncFile, writeFileAtomic } from './durable-file.js';
import { quoteIdent } from '../duckdb/sql.js';
import { StoreWriter, storeWriteError } from './store-writer.js';
import { committedSeq } from './ack-state-transactions.js';
import {
  StoreCheckError,
  StoreCorruptError,
  StoreIdentityError,
  StoreInUseError,
  StoreUnwritableError,
  StoreUpgradeError,
  StoreVersionError,
  NO_ATTRIBUTES,
  type BacklogRow,
  type BacklogSource,
  type CompactionPlan,
  type ExpiredRun,
  type IamPolicyRow,
  type MessageTotals,
  type RetainedAcks,
  type SchemaRow,
  type SnapshotRecord,
  type SnapshotRequest,
  type SnapshotTooOld,
  type Store,
  type StoredMessage,
  type SubscriptionRecord,
  type TopicRecord,
} from './store.js';

/** Marks the file as ours, so pointing Orderly at some other SQLite file fails loudly instead of mixing. */
const APPLICATION_ID = 0x4f52444c; // "ORDL"
/**
 * 2: subscriptions have a uid, the store an id. 3: snapshots; subscriptions can be detached. 4: where each
 * subscription's retention of acked messages began. 5: the store's tables are schema 4's, but what the
 * data directory's sinks hold is not: a DuckDB export's progress log has each key's written ranges
 * (first_sequence), which an Orderly of schema 4 reads as 1 to the last and cannot append to (its rows
 * have one column fewer). The store's version is the one every Orderly checks at start, so it is what
 * makes an older one refuse the directory instead of misreading its sinks.
 */
const SCHEMA_VERSION = 5;
/** The last schema that changed the store's tables: what a process that writes no export sink upgrades to. */
const TABLES_VERSION = 4;
/**
 * New stores only (SQLite fixes a file's page size when it is made; an existing store keeps its own). A 1 KB
 * message's row takes ~1,055 B: 31 fit a 32 KiB page, 15 a 16 KiB one with half a row left empty, so every
 * smaller size misses the disk target (1,130 B a message at 16 KiB, 1,209 at 8 against 1,095). Smaller pages
 * cut what a commit writes in proportion (each writes 4-5 whole pages, mostly the last page of each table it
 * appends to) but did not shorten the commit: docs/benchmarks.md, "What a commit writes, and the page size".
 */
const PAGE_SIZE = 32 * 1024;
/** The store files open in this process (real paths), each by one SqliteStore until it is closed. */
const openStores = new Set<string>();

/** The reading connection's page cache: 128 pages, room for the B-tree interiors and the pages a scan is on. */
const READER_CACHE_KIB = 4096;
/** A subscription's (@sub) unacked messages of its topic (@topic) with seq in (@after, @upTo], as `m`. */
const UNACKED_IN_RANGE =
  'm.topic_uid = @topic AND m.seq > @after AND m.seq <= @upTo AND NOT EXISTS (SELECT 1 FROM acks a WHERE a.sub = @sub AND a.seq = m.seq)';
/** The store's file in the data directory (with SQLite's `-wal` and `-shm` beside it, and STORE_ID_FILE). */
export const STORE_FILE = 'orderly.sqlite';
/**
 * Beside the store: which store lives in this data directory. While it exists, a missing store file (or
 * another store in its place) is refused rather than silently replaced by a new, empty one.
 */
export const STORE_ID_FILE = 'orderly.sqlite.id';

const SCHEMA = `
  CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v TEXT NOT NULL);
  CREATE TABLE IF NOT EXISTS topics(uid INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT UNIQUE NOT NULL, labels TEXT NOT NULL);
  CREATE TABLE IF NOT EXISTS subscriptions(
    name TEXT PRIMARY KEY, topic_uid INTEGER NOT NULL, spec TEXT NOT NULL, low_seq INTEGER NOT NULL,
    uid TEXT NOT NULL, adopts_name_keyed_progress INTEGER NOT NULL DEFAULT 0, detached INTEGER NOT NULL DEFAULT 0,
    acks_retained_after INTEGER NOT NULL DEFAULT 0);
  CREATE TABLE IF NOT EXISTS messages(
    seq INTEGER PRIMARY KEY, topic_uid INTEGER NOT NULL, ordering_key TEXT NOT NULL, key_seq INTEGER NOT NULL,
    publish_time INTEGER NOT NULL, data BLOB NOT NULL, attributes TEXT);
  CREATE INDEX IF NOT EXISTS messages_by_topic ON messages(topic_uid, seq);
  CREATE INDEX IF NOT EXISTS messages_by_key ON messages(topic_uid, ordering_key, key_seq);
  CREATE TABLE IF NOT EXISTS key_seqs(topic_uid INTEGER, ordering_key TEXT, last INTEGER NOT NULL, PRIMARY KEY(topic_uid, ordering_key)) WITHOUT ROWID;
  CREATE TABLE IF NOT EXISTS acks(sub TEXT, seq INTEGER, PRIMARY KEY(sub, seq)) WITHOUT ROWID;
  CREATE TABLE IF NOT EXISTS failures(sub TEXT, seq INTEGER, n INTEGER NOT NULL, PRIMARY KEY(sub, seq)) WITHOUT ROWID;
  CREATE TABLE IF NOT EXISTS snapshots(
    uid INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT UNIQUE NOT NULL, topic_uid INTEGER NOT NULL, low_seq INTEGER NOT NULL,
    expire_time INTEGER NOT NULL, max_expire_time INTEGER NOT NULL, labels TEXT NOT NULL);
  CREATE TABLE IF NOT EXISTS snapshot_acks(snapshot INTEGER, seq INTEGER, PRIMARY KEY(snapshot, seq)) WITHOUT ROWID;
`;

/**
 * Schemas, IAM policies and topic settings (issue #13), added beside schema version 2 rather than as a
 * version of their own, so the step is independent of other additions: it creates what is missing and
 * records that the topics table has its settings column (`meta.topic_settings`). Running it again
 * changes nothing.
 */
function addSchemaAndTopicSettings(db: Database.Database): void {
  db.exec(`
    CREATE TABLE IF NOT EXISTS schemas(name TEXT PRIMARY KEY, record TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS iam_policies(resource TEXT PRIMARY KEY, policy TEXT NOT NULL);
  `);
  const done = db.prepare("SELECT v FROM meta WHERE k = 'topic_settings'").pluck().get() !== undefined;
  if (done) return;
  const columns = (db.prepare('PRAGMA table_info(topics)').all() as { name: string }[]).map((c) => c.name);
  if (!columns.includes('settings')) db.exec("ALTER TABLE topics ADD COLUMN settings TEXT NOT NULL DEFAULT '{}'");
  db.prepare("INSERT INTO meta(k, v) VALUES ('topic_settings', '1')").run();
}

export interface SqliteStoreOptions {
  /**
   * 'fsync' (default): a resolved write survives power loss (SQLite synchronous=FULL).
   * 'process': it survives a crash or kill -9 of the process but not of the machine (synchronous=NORMAL).
   */
  durability?: 'fsync' | 'process';
  /**
   * false: this process writes no export sink (status, audit, a query): an older store is upgraded only as
   * far as its tables need, not marked as one whose sinks hold what an older Orderly misreads (schema 5),
   * so looking at a directory with this Orderly leaves it open to the one that wrote it. Default true.
   */
  exports?: boolean;
  /**
   * false (read-only commands): an existing store that opening would change — an older schema's, which
   * is upgraded — is refused with StoreUpgradeError and left as it is; nor is a missing id file written
   * beside it. A new store is made as always. Default true.
   */
  upgrade?: boolean;
}

/**
 * A backlog row as the queries return it, a tuple (`raw()`): better-sqlite3 builds an object row property by
 * property, which made up a third of a backlog scan's cost. `data` is the payload when it is at most
 * INLINE_DATA bytes, else null; `acked` and `failures` come with `scanKey`'s rows only (`scan` reads them by range).
 */
type BacklogQueryRow = [
  seq: number,
  topicUid: number,
  orderingKey: string,
  keySeq: number,
  publishTime: number,
  attributes: string | null,
  data: Buffer | null,
  acked?: number,
  failures?: number | null,
];

const NO_DATA = Buffer.alloc(0);
/** Thrown inside a transaction to roll it back. */
class RollBack extends Error {}
/** Payloads read with their row in a backlog scan; larger ones are read alone, and only within the budget. */
const INLINE_DATA = 64 * 1024;

/** Embedded default store: one SQLite file in WAL mode under the data directory. */
export class SqliteStore implements Store {
  readonly location: string;
  readonly id: string;
  private readonly db: Database.Database;
  private readonly writer: StoreWriter;
  private readonly stmt;

  private constructor(file: string, options: SqliteStoreOptions, expectedId: string | undefined, upgrade: boolean) {
    this.location = file;
    this.db = new Database(file, { fileMustExist: true });
    try {
      const synchronous = options.durability === 'process' ? 'NORMAL' : 'FULL';
      this.db.pragma('journal_mode = WAL');
      this.db.pragma(`synchronous = ${synchronous}`);
      this.checkIdentity();
      this.checkWritable();
      this.id = this.migrate(options.exports === false ? TABLES_VERSION : SCHEMA_VERSION, upgrade);
      if (expectedId !== undefined && expectedId !== this.id) {
        const marker = join(dirname(file), STORE_ID_FILE);
        throw new StoreIdentityError(
          `the Orderly store ${file} is store ${this.id}, but this data directory holds store ${expectedId} (named in ${marker}): the file was replaced. ` +
            `Put the right file back; to use this one here on purpose, delete ${marker}.`,
        );
      }
      // The writer thread writes concurrently; a rare write here (DDL, seek, compaction) waits its turn.
      this.db.pragma('busy_timeout = 10000');
      this.db.pragma('wal_autocheckpoint = 0'); // the writer thread checkpoints
      // This connection reads: backlog windows in seq order (each page once), and point lookups. better-sqlite3's
      // default page cache (16,000 KiB) filled up within a drain and stayed resident for no gain.
      this.db.pragma(`cache_size = -${READER_CACHE_KIB}`);
      // Later writes fail with the error that names the file, as reported.
      this.writer = new StoreWriter(file, synchronous, (e, kind) => {
        const error =
          kind === 'unchecked' ? new StoreCheckError(this.location, e) : new StoreCorruptError(this.location, e, kind === 'damaged');
        this.fail(error);
        return error;
      });
    } catch (e) {
      this.db.close();
      throw e;
    }
    const db = this.db;
    // Payloads up to INLINE_DATA bytes come with the row (one query per chunk); larger ones are read one by one.
    // No separate length(m.data) column: a second length() per row made a backlog scan ~20% slower (`dataBytes`).
    const messageColumns = `m.seq, m.topic_uid, m.ordering_key, m.key_seq, m.publish_time, m.attributes,
                CASE WHEN length(m.data) <= ${INLINE_DATA} THEN m.data END AS data`;
    const backlogColumns = `${messageColumns}, (a.seq IS NOT NULL) AS acked, f.n AS failures
           FROM messages m
           LEFT JOIN acks a ON a.sub = @sub AND a.seq = m.seq
           LEFT JOIN failures f ON f.sub = @sub AND f.seq = m.seq`;
    this.stmt = {
      readData: db.prepare('SELECT data FROM messages WHERE seq = ?').pluck(),
      dataBytes: db.prepare('SELECT length(data) FROM messages WHERE seq = ?').pluck(),
      // The backlog in seq order without its acks and failures, which come by range (`scan`): looked up row by
      // row (a join), they cost as much as reading the rows themselves.
      scan: db
        .prepare(`SELECT ${messageColumns} FROM messages m WHERE m.topic_uid = @topic AND m.seq > @after ORDER BY m.seq LIMIT @limit`)
        .raw(),
      ackedIn: db.prepare('SELECT seq FROM acks WHERE sub = ? AND seq > ? AND seq <= ?').pluck(),
      failuresIn: db.prepare('SELECT seq, n FROM failures WHERE sub = ? AND seq > ? AND seq <= ?').raw(),
      scanKey: db
        .prepare(
          `SELECT ${backlogColumns}
            WHERE m.topic_uid = @topic AND m.ordering_key = @key AND m.key_seq >= @from AND m.seq <= @max
            ORDER BY m.key_seq LIMIT @limit`,
        )
        .raw(),
      countUnacked: db.prepare(`SELECT count(*) FROM messages m WHERE ${UNACKED_IN_RANGE}`).pluck(),
      unackedAttributes: db.prepare(`SELECT m.seq, m.attributes FROM messages m WHERE ${UNACKED_IN_RANGE} ORDER BY m.seq`).raw(),
      unackedByKey: db
        .prepare(
          `SELECT m.ordering_key, count(*) AS n FROM messages m WHERE ${UNACKED_IN_RANGE} AND m.ordering_key <> ''
            GROUP BY m.ordering_key ORDER BY n DESC, m.ordering_key LIMIT @limit`,
        )
        .raw(),
      messageTotals: db
        .prepare(
          `SELECT count(*), coalesce(sum(n), 0), max(seq) FROM
             (SELECT seq, length(data) AS n FROM messages WHERE topic_uid = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?)`,
        )
        .raw(),
      firstPublishTimeAfter: db.prepare('SELECT publish_time FROM messages WHERE topic_uid = ? AND seq > ? ORDER BY seq LIMIT 1').pluck(),
      // expiredRun: the end of a range of `limit` messages (the index alone), the first one in it still
      // live (which stops there), and the last message when fewer than `limit` are left.
      nthSeqAfter: db.prepare('SELECT seq FROM messages WHERE topic_uid = ? AND seq > ? ORDER BY seq LIMIT 1 OFFSET ?').pluck(),
      firstLiveIn: db
        .prepare(
          'SELECT seq, publish_time FROM messages WHERE topic_uid = ? AND seq > ? AND seq <= ? AND publish_time >= ? ORDER BY seq LIMIT 1',
        )
        .raw(),
      lastSeqAfter: db.prepare('SELECT max(seq) FROM messages WHERE topic_uid = ? AND seq > ?').pluck(),
      // One statement for a publish's new keys: a query per key cost 10-40 ms per 1000 keys on the event
      // loop (the longest step of a backlog's first publishes), this one 3-6 ms.
      lastKeySeqs: db
        .prepare(
          `SELECT max(coalesce((SELECT max(key_seq) FROM messages WHERE topic_uid = @topic AND ordering_key = k.value), 0),
                      coalesce((SELECT last FROM key_seqs WHERE topic_uid = @topic AND ordering_key = k.value), 0))
             FROM json_each(@keys) k ORDER BY k.key`,
        )
        .pluck(),
    };
  }

  /**
   * Opens `<dataDir>/orderly.sqlite`, creating it if the directory never had a store. Never a reset: a
   * corrupt, foreign, empty (0 bytes) or replaced file is an error naming it, and so is a missing one
   * while `orderly.sqlite.id` says this directory had a store (delete that file to start anew on purpose).
   */
  static open(dataDir: string, options: SqliteStoreOptions = {}): SqliteStore {
    mkdirSync(dataDir, { recursive: true });
    const file = join(dataDir, STORE_FILE);
    // By the directory's real path: the same store reached through a symlink or a relative path is the same.
    const inUse = join(realpathSync(dataDir), STORE_FILE);
    if (openStores.has(inUse)) throw new StoreInUseError(file);
    const marker = join(dataDir, STORE_ID_FILE);
    const expectedId = readStoreId(marker);
    const created = !existsSync(file);
    if (created) {
      if (expectedId !== undefined) {
        throw new StoreIdentityError(
          `the Orderly store ${file} is missing, but this data directory held store ${expectedId} (named in ${marker}); ` +
            `a new, empty store would drop its subscriptions and backlog. Restore ${file} from a backup; to start a new, empty store here on purpose, delete ${marker}.`,
        );
      }
      try {
        createStoreFile(file);
      } catch (e) {
        throw new StoreCorruptError(file, new Error(`cannot create it: ${(e as Error).message}`));
      }
    } else if (statSync(file).size === 0) {
      throw new StoreCorruptError(
        file,
        new Error('the file is empty (0 bytes): an Orderly store never is, and Orderly does not re-initialise one'),
      );
    }
    const upgrade = created || options.upgrade !== false;
    let store: SqliteStore;
    try {
      store = new SqliteStore(file, options, expectedId, upgrade);
    } catch (e) {
      if (
        e instanceof StoreCorruptError ||
        e instanceof StoreIdentityError ||
        e instanceof StoreUnwritableError ||
        e instanceof StoreVersionError ||
        e instanceof StoreUpgradeError
      )
        throw e;
      throw new StoreCorruptError(file, e);
    }
    if (expectedId === undefined && upgrade) writeFileAtomic(marker, storeIdFile(store.id));
    openStores.add(inUse);
    store.inUse = inUse;
    return store;
  }

  /** This store's entry in `openStores`, until it is closed. */
  private inUse?: string;
  private readonly fatalListeners: ((error: Error) => void)[] = [];
  private fatal?: Error;

  onFatal(listener: (error: Error) => void): void {
    if (this.fatal) listener(this.fatal);
    else this.fatalListeners.push(listener);
  }

  private fail(error: Error): void {
    if (this.fatal) return;
    this.fatal = error;
    for (const listener of this.fatalListeners) listener(error);
  }

  /** The rare writes on this connection (topics, subscriptions, seeks, snapshots…) stop with the writer's. */
  private writable(): void {
    if (this.fatal) throw this.fatal;
  }

  /** Before a write on this connection that the writer's queued writes must not land after. */
  private async writesLanded(): Promise<void> {
    this.writable();
    await this.writer.drain();
    this.writable(); // the check may have found damage meanwhile
  }

  private checkIdentity(): void {
    const appId = this.db.pragma('application_id', { simple: true }) as number;
    const tables = this.db.prepare("SELECT count(*) FROM sqlite_master WHERE type = 'table'").pluck().get() as number;
    // A SQLite file without a single table holds nothing to lose (and is not another program's data).
    if (appId === 0 && tables === 0) {
      this.db.pragma(`application_id = ${APPLICATION_ID}`);
      return;
    }
    if (appId !== APPLICATION_ID) throw new StoreCorruptError(this.location, new Error('not an Orderly store (foreign SQLite file)'));
    // Every table but the messages here (they are small); the whole file, messages included, is checked on a
    // thread of its own while the store runs (StoreWriter), so a large store opens in well under a second.
    const small = this.db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name <> 'messages'").pluck().all() as string[];
    for (const table of small) {
      const result = this.db.pragma(`quick_check(${quoteIdent(table)})`, { simple: true });
      if (result !== 'ok') throw new StoreCorruptError(this.location, new Error(`integrity check failed: ${String(result)}`));
    }
  }

  /**
   * SQLite opens a file it may not write (permissions, a read-only mount) read-only without a word, and
   * the store would then refuse every publish and ack while the job ran: a write (rolled back, so the
   * file is not changed) shows it at start.
   */
  private checkWritable(): void {
    try {
      this.db.transaction(() => {
        this.db.pragma(`user_version = ${this.db.pragma('user_version', { simple: true }) as number}`);
        throw new RollBack();
      })();
    } catch (e) {
      if (!(e instanceof RollBack)) throw new StoreUnwritableError(this.location, e);
    }
  }

  /**
   * Creates or upgrades the schema, to `target` at least; returns the store's id. Not `upgrade`: a store
   * it would change is refused (StoreUpgradeError), the changes rolled back with the transaction.
   */
  private migrate(target: number, upgrade: boolean): string {
    // Every step below is a change of the schema or of meta's rows: these two tell whether one was made.
    const changes = () =>
      `${this.db.pragma('schema_version', { simple: true }) as number} ${this.db.prepare('SELECT total_changes()').pluck().get() as number}`;
    return this.db.transaction(() => {
      const before = changes();
      this.db.exec(SCHEMA);
      const meta = (k: string) => this.db.prepare('SELECT v FROM meta WHERE k = ?').pluck().get(k) as string | undefined;
      const setMeta = (k: string, v: string) =>
        this.db.prepare('INSERT INTO meta(k, v) VALUES (?, ?) ON CONFLICT(k) DO UPDATE SET v = excluded.v').run(k, v);
      const version = meta('schema');
      // A store without a version was made by this schema's SCHEMA above.
      const from = version === undefined ? TABLES_VERSION : Number(version);
      if (from > SCHEMA_VERSION) throw new StoreVersionError(this.location, from, SCHEMA_VERSION);
      if (!(Number.isInteger(from) && from >= 1)) throw new StoreCorruptError(this.location, new Error(`schema version ${version}`));
      if (from < 2) {
        // Subscriptions of a store made before uids: each gets one, and its sinks adopt what they kept
        // under its name (once).
        this.db.exec(`
          ALTER TABLE subscriptions ADD COLUMN uid TEXT NOT NULL DEFAULT '';
          ALTER TABLE subscriptions ADD COLUMN adopts_name_keyed_progress INTEGER NOT NULL DEFAULT 0;
        `);
        const names = this.db.prepare('SELECT name FROM subscriptions').pluck().all() as string[];
        const assign = this.db.prepare('UPDATE subscriptions SET uid = ?, adopts_name_keyed_progress = 1 WHERE name = ?');
        for (const name of names) assign.run(randomUUID(), name);
      }
      const columns = () => (this.db.prepare('PRAGMA table_info(subscriptions)').all() as { name: string }[]).map((c) => c.name);
      if (from < 3) {
        // 3: the snapshot tables come with SCHEMA above; subscriptions learn to be detached.
        if (!columns().includes('detached')) this.db.exec('ALTER TABLE subscriptions ADD COLUMN detached INTEGER NOT NULL DEFAULT 0');
      }
      if (from < 4) {
        // 4: where each subscription's retention of acked messages began (0: not known, as before).
        if (!columns().includes('acks_retained_after'))
          this.db.exec('ALTER TABLE subscriptions ADD COLUMN acks_retained_after INTEGER NOT NULL DEFAULT 0');
      }
      // 5: nothing in the store changes (see SCHEMA_VERSION); the sinks read what older versions wrote.
      // Written only when they change: opening a store (a damaged one included) leaves the file as it is.
      if (version === undefined || from < target) setMeta('schema', String(target));
      addSchemaAndTopicSettings(this.db);
      const id = meta('store_id') ?? randomUUID();
      if (meta('store_id') !== id) setMeta('store_id', id);
      if (!upgrade && changes() !== before) throw new StoreUpgradeError(this.location, from);
      return id;
    })();
  }

  async lastSeq(): Promise<number> {
    return committedSeq(this.db);
  }

  private metaNumber(k: string): number {
    return Number(this.db.prepare('SELECT v FROM meta WHERE k = ?').pluck().get(k) ?? 0);
  }

  /**
   * A key's last sequence lives in its newest message (found through the key index); key_seqs keeps it only
   * for keys whose messages compaction deleted. So publishing writes no per-key row.
   */
  lastKeySeqs(topicUid: number, orderingKeys: string[]): Map<string, number> {
    // One row per key, in the order given (json_each's key is the array index).
    const last = this.stmt.lastKeySeqs.all({ topic: topicUid, keys: JSON.stringify(orderingKeys) }) as number[];
    return new Map(orderingKeys.map((key, i) => [key, last[i]!]));
  }

  async listTopics(): Promise<TopicRecord[]> {
    const rows = this.db.prepare('SELECT uid, name, labels, settings FROM topics ORDER BY name').all() as {
      uid: number;
      name: string;
      labels: string;
      settings: string;
    }[];
    return rows.map((r) => ({
      uid: r.uid,
      name: r.name,
      labels: JSON.parse(r.labels) as Record<string, string>,
      settings: JSON.parse(r.settings) as unknown,
    }));
  }

  async createTopic(name: string, labels: Record<string, string>, settings: unknown): Promise<TopicRecord> {
    this.writable();
    const info = this.db
      .prepare('INSERT INTO topics(name, labels, settings) VALUES (?, ?, ?)')
      .run(name, JSON.stringify(labels), JSON.stringify(settings));
    return { uid: Number(info.lastInsertRowid), name, labels, settings };
  }

  async updateTopic(topic: TopicRecord): Promise<void> {
    this.writable();
    this.db
      .prepare('UPDATE topics SET labels = ?, settings = ? WHERE uid = ?')
      .run(JSON.stringify(topic.labels), JSON.stringify(topic.settings), topic.uid);
  }

  async deleteTopic(uid: number): Promise<void> {
    this.writable();
    this.db.prepare('DELETE FROM topics WHERE uid = ?').run(uid);
  }

  async listSchemas(): Promise<SchemaRow[]> {
    const rows = this.db.prepare('SELECT name, record FROM schemas ORDER BY name').all() as { name: string; record: string }[];
    return rows.map((r) => ({ name: r.name, record: JSON.parse(r.record) as unknown }));
  }

  async putSchema(schema: SchemaRow): Promise<void> {
    this.writable();
    this.db
      .prepare('INSERT INTO schemas(name, record) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET record = excluded.record')
      .run(schema.name, JSON.stringify(schema.record));
  }

  async deleteSchema(name: string): Promise<void> {
    this.writable();
    this.db.prepare('DELETE FROM schemas WHERE name = ?').run(name);
  }

  async listIamPolicies(): Promise<IamPolicyRow[]> {
    const rows = this.db.prepare('SELECT resource, policy FROM iam_policies ORDER BY resource').all() as {
      resource: string;
      policy: string;
    }[];
    return rows.map((r) => ({ resource: r.resource, policy: JSON.parse(r.policy) as unknown }));
  }

  async putIamPolicy(resource: string, policy: unknown): Promise<void> {
    this.writable();
    if (policy === undefined) this.db.prepare('DELETE FROM iam_policies WHERE resource = ?').run(resource);
    else {
      this.db
        .prepare('INSERT INTO iam_policies(resource, policy) VALUES (?, ?) ON CONFLICT(resource) DO UPDATE SET policy = excluded.policy')
        .run(resource, JSON.stringify(policy));
    }
  }

  async listSubscriptions(): Promise<SubscriptionRecord[]> {
    const rows = this.db
      .prepare(
        'SELECT name, uid, adopts_name_keyed_progress, topic_uid, spec, low_seq, detached, acks_retained_after FROM subscriptions ORDER BY name',
      )
      .all() as {
      name: string;
      uid: string;
      adopts_name_keyed_progress: number;
      topic_uid: number;
      spec: string;
      low_seq: number;
      detached: number;
      acks_retained_after: number;
    }[];
    return rows.map((r) => ({
      name: r.name,
      uid: r.uid,
      adoptsNameKeyedProgress: r.adopts_name_keyed_progress === 1,
      topicUid: r.topic_uid,
      spec: JSON.parse(r.spec) as unknown,
      lowSeq: r.low_seq,
      detached: r.detached === 1,
      acksRetainedAfter: r.acks_retained_after,
    }));
  }

  async createSubscription(sub: SubscriptionRecord): Promise<void> {
    this.writable();
    this.db
      .prepare(
        `INSERT INTO subscriptions(name, uid, adopts_name_keyed_progress, topic_uid, spec, low_seq, detached, acks_retained_after)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        sub.name,
        sub.uid,
        sub.adoptsNameKeyedProgress ? 1 : 0,
        sub.topicUid,
        JSON.stringify(sub.spec),
        sub.lowSeq,
        sub.detached ? 1 : 0,
        sub.acksRetainedAfter,
      );
  }

  async updateSubscriptionSpec(name: string, spec: unknown, acksRetainedAfter?: number): Promise<void> {
    this.writable();
    this.db
      .prepare('UPDATE subscriptions SET spec = ?, acks_retained_after = coalesce(?, acks_retained_after) WHERE name = ?')
      .run(JSON.stringify(spec), acksRetainedAfter ?? null, name);
  }

  async deleteSubscription(name: string): Promise<void> {
    await this.writesLanded(); // its queued acks must not land after the delete
    this.db.transaction(() => {
      this.db.prepare('DELETE FROM subscriptions WHERE name = ?').run(name);
      this.db.prepare('DELETE FROM acks WHERE sub = ?').run(name);
      this.db.prepare('DELETE FROM failures WHERE sub = ?').run(name);
    })();
  }

  async detachSubscription(name: string, lowSeq: number): Promise<void> {
    await this.writesLanded(); // its queued acks must not land after the backlog is dropped
    this.db.transaction(() => {
      this.db.prepare('UPDATE subscriptions SET detached = 1, low_seq = max(low_seq, ?) WHERE name = ?').run(lowSeq, name);
      this.db.prepare('DELETE FROM acks WHERE sub = ?').run(name);
      this.db.prepare('DELETE FROM failures WHERE sub = ?').run(name);
    })();
  }

  async listSnapshots(): Promise<SnapshotRecord[]> {
    const rows = this.db
      .prepare('SELECT uid, name, topic_uid, low_seq, expire_time, max_expire_time, labels FROM snapshots ORDER BY name')
      .all() as SnapshotRow[];
    return rows.map(toSnapshot);
  }

  async createSnapshot(request: SnapshotRequest): Promise<SnapshotRecord | SnapshotTooOld> {
    // The subscription's acks queued so far are part of it.
    await this.writesLanded();
    return this.writer.createSnapshot(request);
  }

  async updateSnapshot(snapshot: SnapshotRecord): Promise<void> {
    this.writable();
    this.db
      .prepare('UPDATE snapshots SET labels = ?, expire_time = ? WHERE uid = ?')
      .run(JSON.stringify(snapshot.labels), snapshot.expireTime, snapshot.uid);
  }

  async deleteSnapshot(uid: number): Promise<void> {
    this.writable();
    this.db.transaction(() => {
      this.db.prepare('DELETE FROM snapshots WHERE uid = ?').run(uid);
      this.db.prepare('DELETE FROM snapshot_acks WHERE snapshot = ?').run(uid);
    })();
  }

  async seekToSnapshot(sub: SubscriptionRecord, snapshotUid: number): Promise<number | undefined> {
    // Everything queued so far must land first, or an ack committed after the seek would undo it.
    await this.writesLanded();
    return this.writer.seek({ kind: 'snapshot', sub: sub.name, snapshot: snapshotUid });
  }

  append(messages: StoredMessage[]): Promise<void> {
    return this.writer.submit({ kind: 'append', messages });
  }

  ack(subscription: string, seqs: number[]): Promise<void> {
    return this.writer.submit({ kind: 'ack', subscription, seqs });
  }

  setFailures(subscription: string, seq: number, failures: number): Promise<void> {
    return this.writer.submit({ kind: 'failures', subscription, seq, failures });
  }

  flush(): Promise<void> {
    return this.writer.drain();
  }

  readData(seq: number): Buffer | undefined {
    return this.stmt.readData.get(seq) as Buffer | undefined;
  }

  scan(source: BacklogSource, afterSeq: number, limit: number, dataBytes: number): BacklogRow[] {
    const rows = this.stmt.scan.all({ topic: source.topicUid, after: afterSeq, limit }) as BacklogQueryRow[];
    const last = rows[rows.length - 1]?.[0];
    if (last !== undefined) {
      // One snapshot per statement: a row acked in between shows acked, as it is by now.
      const acked = this.stmt.ackedIn.all(source.name, afterSeq, last) as number[];
      const failures = this.stmt.failuresIn.all(source.name, afterSeq, last) as [number, number][];
      if (acked.length || failures.length) {
        const ackedSet = new Set(acked);
        const failureMap = new Map(failures);
        for (const r of rows) {
          r[7] = ackedSet.has(r[0]) ? 1 : 0;
          r[8] = failureMap.get(r[0]) ?? null;
        }
      }
    }
    return this.toBacklog(rows, dataBytes);
  }

  scanKey(source: BacklogSource, orderingKey: string, fromKeySeq: number, maxSeq: number, limit: number, dataBytes: number): BacklogRow[] {
    const rows = this.stmt.scanKey.all({
      sub: source.name,
      topic: source.topicUid,
      key: orderingKey,
      from: fromKeySeq,
      max: maxSeq,
      limit,
    }) as BacklogQueryRow[];
    return this.toBacklog(rows, dataBytes);
  }

  /** Payloads are read one by one, and only within the budget: a row may hold 10 MB. */
  private toBacklog(rows: BacklogQueryRow[], dataBytes: number): BacklogRow[] {
    let room = dataBytes;
    const backlog = new Array<BacklogRow>(rows.length);
    let key = '';
    for (let i = 0; i < rows.length; i++) {
      const [seq, topicUid, rowKey, keySeq, publishTime, attributes, inline, acked, failures] = rows[i]!;
      // Runs of one key share one string: the window keeps its messages for a while, and every object it
      // keeps is copied by the young-generation GC (the row's own copy dies young, which costs nothing).
      const orderingKey = rowKey === key ? key : (key = rowKey);
      // A larger payload's length is read alone; a row compacted away meanwhile counts as too large, then as gone.
      const dataBytes = inline !== null ? inline.byteLength : ((this.stmt.dataBytes.get(seq) as number | undefined) ?? INLINE_DATA + 1);
      let data: Buffer = NO_DATA;
      if (dataBytes <= room) {
        const read = inline ?? this.readData(seq);
        if (read) {
          data = read;
          room -= dataBytes;
        }
      } else room = 0; // keep the payloads that are read a prefix, as the caller's budget accounting assumes
      const message: StoredMessage = {
        seq,
        topicUid,
        orderingKey,
        keySeq,
        publishTime,
        data,
        attributes: attributes ? (JSON.parse(attributes) as Record<string, string>) : NO_ATTRIBUTES,
      };
      backlog[i] = { message, dataBytes, acked: acked === 1, failures: failures ?? 0 };
    }
    return backlog;
  }

  unackedByKey(source: BacklogSource, afterSeq: number, upToSeq: number, limit: number): { orderingKey: string; backlog: number }[] {
    const rows = this.stmt.unackedByKey.all({ sub: source.name, topic: source.topicUid, after: afterSeq, upTo: upToSeq, limit }) as [
      string,
      number,
    ][];
    return rows.map(([orderingKey, backlog]) => ({ orderingKey, backlog }));
  }

  countUnacked(source: BacklogSource, afterSeq: number, upToSeq: number): number {
    return this.stmt.countUnacked.get({ sub: source.name, topic: source.topicUid, after: afterSeq, upTo: upToSeq }) as number;
  }

  unackedAttributes(source: BacklogSource, afterSeq: number, upToSeq: number): { seq: number; attributes: Record<string, string> }[] {
    const rows = this.stmt.unackedAttributes.all({ sub: source.name, topic: source.topicUid, after: afterSeq, upTo: upToSeq }) as [
      number,
      string | null,
    ][];
    return rows.map(([seq, attributes]) => ({ seq, attributes: attributes ? (JSON.parse(attributes) as Record<string, string>) : {} }));
  }

  messageTotals(topicUid: number, afterSeq: number, upToSeq: number, limit: number): MessageTotals {
    const [messages, bytes, lastSeq] = this.stmt.messageTotals.get(topicUid, afterSeq, upToSeq, limit) as [number, number, number | null];
    return { messages, bytes, lastSeq: lastSeq ?? afterSeq };
  }

  firstPublishTimeAfter(topicUid: number, afterSeq: number): number | undefined {
    return (this.stmt.firstPublishTimeAfter.get(topicUid, afterSeq) as number | undefined) ?? undefined;
  }

  expiredRun(topicUid: number, afterSeq: number, before: number, limit: number): ExpiredRun {
    const end = this.stmt.nthSeqAfter.get(topicUid, afterSeq, limit - 1) as number | undefined;
    const live = this.stmt.firstLiveIn.get(topicUid, afterSeq, end ?? Number.MAX_SAFE_INTEGER, before) as [number, number] | undefined;
    if (live) return { upTo: live[0] - 1, more: false, liveFrom: live[1] };
    if (end !== undefined) return { upTo: end, more: true };
    return { upTo: (this.stmt.lastSeqAfter.get(topicUid, afterSeq) as number | null) ?? afterSeq, more: false };
  }

  async seek(sub: SubscriptionRecord, time: number, retained: RetainedAcks): Promise<number> {
    // Everything queued so far must land first, or an ack committed after the seek would undo it.
    await this.writesLanded();
    const low = await this.writer.seek({
      kind: 'time',
      sub: sub.name,
      topic: sub.topicUid,
      time,
      retainedAfter: sub.acksRetainedAfter,
      retained,
    });
    return low!;
  }

  /**
   * Runs on the writer thread in small transactions, between the group commits of publishes and acks,
   * then gives the freed pages back to the file system (incremental vacuum): the event loop never waits
   * for it, however much there is to delete.
   */
  compact(plan: CompactionPlan): Promise<{ deletedMessages: number }> {
    return this.writer.compact(plan);
  }

  /** The database file and its WAL, which holds committed pages until a checkpoint copies them back. */
  diskBytes(): number {
    return [this.location, `${this.location}-wal`].reduce((n, f) => n + (statSync(f, { throwIfNoEntry: false })?.size ?? 0), 0);
  }

  async close(): Promise<void> {
    try {
      await this.writer.close();
      this.db.close();
    } finally {
      if (this.inUse !== undefined) openStores.delete(this.inUse);
    }
  }
}

/**
 * The writes the store's own connection makes (the rare ones: topics, subscriptions, schemas, snapshots,
 * seeks). A full disk fails them as it fails the writer thread's, with a StoreFullError
 * (RESOURCE_EXHAUSTED) naming the store, not as an unexpected error.
 */
const OWN_WRITES = [
  'createTopic',
  'updateTopic',
  'deleteTopic',
  'putSchema',
  'deleteSchema',
  'putIamPolicy',
  'createSubscription',
  'updateSubscriptionSpec',
  'deleteSubscription',
  'detachSubscription',
  'createSnapshot',
  'updateSnapshot',
  'deleteSnapshot',
  'seekToSnapshot',
  'seek',
] as const satisfies readonly (keyof SqliteStore)[];
for (const name of OWN_WRITES) {
  const write = Object.getOwnPropertyDescriptor(SqliteStore.prototype, name)!.value as (
    this: SqliteStore,
    ...args: unknown[]
  ) => Promise<unknown>;
  Object.defineProperty(SqliteStore.prototype, name, {
    value: function (this: SqliteStore, ...args: unknown[]) {
      return write.apply(this, args).catch((e: unknown) => {
        throw e instanceof Error ? storeWriteError(this.location, e) : e;
      });
    },
    writable: true,
    configurable: true,
  });
}

/**
 * A new store is made under a temporary name and moved into place complete, so `orderly.sqlite` is never
 * seen empty or half made: an empty one is damage, not a store a crash interrupted.
 */
function createStoreFile(file: string): void {
  const tmp = `${file}.new`;
  for (const f of [tmp, `${tmp}-journal`, `${tmp}-wal`, `${tmp}-shm`]) rmSync(f, { force: true });
  const db = new Database(tmp);
  try {
    // Before the first table exists (PAGE_SIZE), and incremental vacuum lets compaction give freed pages back.
    db.pragma(`page_size = ${PAGE_SIZE}`);
    db.pragma('auto_vacuum = INCREMENTAL');
    db.pragma(`application_id = ${APPLICATION_ID}`);
    db.exec(SCHEMA);
    // Marked for its sinks' formats by the first process that exports (migrate).
    db.prepare("INSERT INTO meta(k, v) VALUES ('schema', ?), ('store_id', ?)").run(String(TABLES_VERSION), randomUUID());
  } finally {
    db.close();
  }
  syncFile(tmp);
  durableRename(tmp, file);
}

function storeIdFile(id: string): string {
  return `${JSON.stringify(
    {
      storeId: id,
      store: STORE_FILE,
      note: `Names the Orderly store of this directory. While this file exists, Orderly refuses to start when ${STORE_FILE} is missing or is another store. Delete it only to start a new, empty store here on purpose.`,
    },
    null,
    2,
  )}\n`;
}

function readStoreId(marker: string): string | undefined {
  if (!existsSync(marker)) return undefined;
  let id: unknown;
  try {
    id = (JSON.parse(readFileSync(marker, 'utf8')) as { storeId?: unknown }).storeId;
  } catch {
    // reported below
  }
  if (typeof id === 'string' && id !== '') return id;
  throw new StoreIdentityError(
    `${marker} does not name a store (expected JSON with "storeId"); restore it, or delete it to accept the store that is there`,
  );
}

interface SnapshotRow {
  uid: number;
  name: string;
  topic_uid: number;
  low_seq: number;
  expire_time: number;
  max_expire_time: number;
  labels: string;
}

function toSnapshot(r: SnapshotRow): SnapshotRecord {
  return {
    uid: r.uid,
    name: r.name,
    topicUid: r.topic_uid,
    lowSeq: r.low_seq,
    expireTime: r.expire_time,
    maxExpireTime: r.max_expire_time,
    labels: JSON.parse(r.labels) as Record<string, string>,
  };
}
