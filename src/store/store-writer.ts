import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import {
  StoreFullError,
  type CompactionPlan,
  type SnapshotRecord,
  type SnapshotRequest,
  type SnapshotTooOld,
  type StoredMessage,
  type TopicCompaction,
} from './store.js';
import type { SeekRequest } from './ack-state-transactions.js';

/** The writes that happen per message; everything else is rare and runs on the store's own connection. */
export type StoreWrite =
  | { kind: 'append'; messages: StoredMessage[] }
  | { kind: 'ack'; subscription: string; seqs: number[] }
  | { kind: 'failures'; subscription: string; seq: number; failures: number };

/**
 * A write as it crosses to the thread, one tuple a row (`pack`): a message (its payload is the next
 * `dataBytes` of the transferred buffer), a subscription's acks, a failure count.
 */
export type PackedRow =
  | [
      kind: 'm',
      seq: number,
      topicUid: number,
      orderingKey: string,
      keySeq: number,
      publishTime: number,
      dataBytes: number,
      attributes: string | null,
    ]
  | [kind: 'a', subscription: string, seqs: number[]]
  | [kind: 'f', subscription: string, seq: number, failures: number];

/** A CompactionPlan as it crosses to the thread (maps as entry lists). */
export interface WirePlan {
  watermarks: [string, number][];
  topics: [number, TopicCompaction][];
  keepFromSeq: [number, number][];
}

/** What the main thread asks of the writer thread; each request is answered once, by id. */
export type ThreadRequest = { id: number } & (
  | { op: 'open'; store: number; file: string; synchronous: 'FULL' | 'NORMAL' }
  | { op: 'write'; store: number; rows: string; payloads: ArrayBuffer }
  | { op: 'compact'; store: number; plan: WirePlan }
  | { op: 'seek'; store: number; request: SeekRequest }
  | { op: 'snapshot'; store: number; request: SnapshotRequest }
  | { op: 'close'; store: number }
);
/** `code`: SQLite's code for the error (`SQLITE_FULL`, ...), when it has one. */
export type ThreadReply = { id: number; error?: string; code?: string; result?: unknown };

/**
 * Starts a thread's module: compiled JavaScript when Orderly runs from dist/; when it runs from source
 * (vitest, tsx) the module is TypeScript, and the worker loads tsx's loader itself first (on Node 20 a
 * worker's `--import` flag does not apply to its own entry module).
 */
function startWorker(module: 'writer-thread' | 'store-check'): Worker {
  if (!import.meta.url.endsWith('.ts')) return new Worker(new URL(`./${module}.js`, import.meta.url));
  // tsx's ESM API (its `import` export: the `require` one cannot register ESM hooks), found from its package.json.
  const manifest = createRequire(import.meta.url).resolve('tsx/package.json');
  const api = (JSON.parse(readFileSync(manifest, 'utf8')) as { exports: Record<string, { import: { default: string } }> }).exports[
    './esm/api'
  ]!.import.default;
  const loader = pathToFileURL(join(dirname(manifest), api)).href;
  const thread = new URL(`./${module}.ts`, import.meta.url).href;
  return new Worker(`import(${JSON.stringify(loader)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(thread)}); });`, {
    eval: true,
  });
}

/** The check found damage (as opposed to: it could not run). */
export class DamageFound extends Error {}

/**
 * A handle on a running whole-file check: `result` resolves when it found nothing or was stopped, and
 * rejects with a DamageFound, or another error if it could not run. After `stop`, it reports nothing more;
 * what `stop` returns resolves once the check has ended (its connection to the file closed).
 */
export interface FileCheck {
  result: Promise<void>;
  stop(): Promise<void>;
}

/** The check thread's answer to one check: `found` is quick_check's answer ('ok' when sound). */
export type CheckReply = { id: number; found?: string; error?: string };

/**
 * The thread the whole-file checks run on (store-check.ts), one after another, shared by every store of
 * the process as the writer thread is: a thread of its own per check cost more than the check of a small
 * store (starting it and loading better-sqlite3, and from source a TypeScript loader too: ~0.5 s of CPU a
 * store opened, under vitest), and a close waited for that thread to end. It is never terminated: a stop
 * lets the check under way run to its end (~0.7 s per million messages at most), since better-sqlite3
 * aborts the whole process ("FATAL ERROR: v8::ToLocalChecked Empty MaybeLocal") when SQLite fails inside a
 * thread being terminated, as a check did when a store was closed and its folder removed at once.
 */
class CheckThread {
  private readonly worker: Worker;
  private readonly waiting = new Map<number, (reply: CheckReply) => void>();
  private nextId = 0;
  /** Stopped checks someone waits on the end of. */
  private awaited = 0;

  constructor() {
    this.worker = startWorker('store-check');
    // A check still running must not keep a process that is done from exiting.
    this.worker.unref();
    this.worker.on('message', (reply: CheckReply) => {
      this.waiting.get(reply.id)?.(reply);
      this.waiting.delete(reply.id);
    });
    const end = (error: string) => {
      if (checkThread === this) checkThread = undefined;
      for (const [id, answer] of this.waiting) answer({ id, error });
      this.waiting.clear();
    };
    this.worker.on('error', (e) => end(`its thread failed: ${e.message}`));
    this.worker.on('exit', (code) => end(`its thread exited (code ${code}) without a result`));
  }

  check(file: string): Promise<CheckReply> {
    const id = ++this.nextId;
    return new Promise((resolve) => {
      this.waiting.set(id, resolve);
      this.worker.postMessage({ id, file });
    });
  }

  /**
   * Resolves once `ended` has. Whoever waits for the end must be kept waiting by it: an unref'd thread let
   * a process whose last work was that wait exit at once (code 13, a top-level await left unsettled).
   */
  async awaitEnd(ended: Promise<unknown>): Promise<void> {
    if (this.awaited++ === 0) this.worker.ref();
    await ended;
    if (--this.awaited === 0) this.worker.unref();
  }
}

let checkThread: CheckThread | undefined;

/** Runs the whole-file integrity check (store-check.ts) on the process's check thread. */
export function checkStoreFile(file: string): FileCheck {
  const thread = (checkThread ??= new CheckThread());
  let stopped = false;
  const ended = thread.check(file);
  const result = ended.then(({ found, error }) => {
    if (stopped) return;
    if (error !== undefined) throw new Error(error);
    if (found !== 'ok') throw new DamageFound(`integrity check failed: ${found}`);
  });
  return {
    result,
    stop: () => {
      stopped = true;
      return thread.awaitEnd(ended);
    },
  };
}

/** Why a store takes no more writes: its connection could not open, the check found damage, or could not run. */
export type WriterFailure = 'unopenable' | 'damaged' | 'unchecked';

/** A check that could not even start is one that could not run (not damage, and not a failed open). */
function startCheck(check: (file: string) => FileCheck, file: string): FileCheck {
  try {
    return check(file);
  } catch (e) {
    return { result: Promise.reject(e instanceof Error ? e : new Error(String(e))), stop: () => Promise.resolve() };
  }
}

interface Waiter {
  resolve: (result?: unknown) => void;
  reject: (e: Error) => void;
}

/** The writer thread (writer-thread.ts), shared by every store of the process. */
class WriterThread {
  private readonly worker: Worker;
  private readonly waiting = new Map<number, Waiter>();
  private nextId = 0;
  private failure?: Error;

  constructor() {
    this.worker = startWorker('writer-thread');
    this.worker.on('message', ({ id, error, code, result }: ThreadReply) => {
      const waiter = this.waiting.get(id);
      this.waiting.delete(id);
      if (this.waiting.size === 0) this.worker.unref();
      if (error === undefined) waiter?.resolve(result);
      else waiter?.reject(Object.assign(new Error(error), { code }));
    });
    const stop = (e: Error) => {
      this.failure = e;
      if (thread === this) thread = undefined;
      for (const w of this.waiting.values()) w.reject(e);
      this.waiting.clear();
    };
    this.worker.on('error', (e) => stop(new Error(`the store's writer thread failed: ${e.message}`)));
    this.worker.on('exit', (code) => stop(new Error(`the store's writer thread exited (code ${code})`)));
    this.worker.unref();
  }

  /**
   * Resolves once the thread has carried the request out (with what it answered); writes are carried out
   * in order, a compaction in the background between them.
   */
  request<T = void>(message: DistributiveOmit<ThreadRequest, 'id'>, transfer: ArrayBuffer[] = []): Promise<T> {
    if (this.failure) return Promise.reject(this.failure);
    const id = ++this.nextId;
    return new Promise<T>((resolve, reject) => {
      // While anything is in flight the thread keeps the process alive, so no commit is cut short.
      if (this.waiting.size === 0) this.worker.ref();
      // The thread answers each request with the type its op promises (T).
      this.waiting.set(id, { resolve: (result) => resolve(result as T), reject });
      this.worker.postMessage({ ...message, id }, transfer);
    });
  }
}

/** Appended messages per request to the thread: bounds the event loop's share of one group commit. */
const MAX_MESSAGES_PER_REQUEST = 2000;

/**
 * A group of writes as the thread reads it: the rows as one JSON string of flat tuples (cloning a string
 * is a copy; cloning thousands of small objects is not), and the payloads back to back in one buffer that
 * is transferred, not copied (cloning each payload would copy its whole backing buffer, often Node's
 * shared 8 KiB pool slab). Tuples: ['m', seq, topicUid, orderingKey, keySeq, publishTime, dataBytes,
 * attributesJson | null], ['a', subscription, seqs], ['f', subscription, seq, failures].
 */
type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

function pack(writes: StoreWrite[]): { rows: string; payloads: ArrayBuffer } {
  let total = 0;
  for (const w of writes) if (w.kind === 'append') for (const m of w.messages) total += m.data.byteLength;
  const payloads = new ArrayBuffer(total);
  const bytes = new Uint8Array(payloads);
  const rows: PackedRow[] = [];
  let offset = 0;
  for (const w of writes) {
    if (w.kind === 'ack') rows.push(['a', w.subscription, w.seqs]);
    else if (w.kind === 'failures') rows.push(['f', w.subscription, w.seq, w.failures]);
    else {
      for (const m of w.messages) {
        bytes.set(m.data, offset);
        offset += m.data.byteLength;
        const attributes = hasKeys(m.attributes) ? JSON.stringify(m.attributes) : null;
        rows.push(['m', m.seq, m.topicUid, m.orderingKey, m.keySeq, m.publishTime, m.data.byteLength, attributes]);
      }
    }
  }
  return { rows: JSON.stringify(rows), payloads };
}

function hasKeys(o: Record<string, string>): boolean {
  for (const _ in o) return true;
  return false;
}

/**
 * A write the thread could not commit: a full disk (SQLite's SQLITE_FULL, from ENOSPC or a size limit)
 * is a StoreFullError, RESOURCE_EXHAUSTED to callers, which may retry once space is freed; other errors
 * pass as they are.
 */
export function storeWriteError(file: string, e: Error): Error {
  const code = (e as { code?: unknown }).code;
  return typeof code === 'string' && code.startsWith('SQLITE_FULL') ? new StoreFullError(file, e) : e;
}

let thread: WriterThread | undefined;
let stores = 0;

/**
 * A store's per-message writes, carried out on the writer thread: the writes issued during one turn of
 * the event loop go over as one message, and the messages that arrive while the thread commits commit
 * together in its next transaction; each caller's promise settles when that transaction has committed
 * (or failed). Durability is unchanged — a promise resolves
 * only after the commit — while the inserts, the commit's sync and the WAL checkpoints leave the event
 * loop (they were most of a publish's cost: docs/benchmarks.md).
 */
export class StoreWriter {
  private readonly thread: WriterThread;
  private readonly store = ++stores;
  private pending: { write: StoreWrite; waiter: Waiter }[] = [];
  private scheduled = false;
  /** The thread's connection; if it could not open, every write fails with the reason. */
  private readonly opened: Promise<void>;
  /** The whole-file check, while it runs. */
  private readonly check: FileCheck;
  /** Why this store takes no more writes: its connection could not open, or the check found damage. */
  private failure?: Error;
  private last: Promise<void>;

  /**
   * The thread opens its connection; meanwhile the whole file is checked (quick_check) on a thread of its
   * own, and writes do not wait for it: its time grows with the file. If the connection cannot open, or the
   * check finds damage or cannot run, `onFailure` is told once (with which) and every write from then on
   * fails with the error it returns. What committed before is in the file; compaction waits for the check
   * (so a compaction under way when the process stops waits for it too).
   */
  constructor(
    private readonly file: string,
    synchronous: 'FULL' | 'NORMAL',
    onFailure: (error: Error, kind: WriterFailure) => Error,
    check = checkStoreFile,
  ) {
    this.thread = thread ??= new WriterThread();
    const fail = (e: Error, kind: WriterFailure) => {
      if (this.failure) return;
      this.failure = onFailure(e, kind);
    };
    this.check = startCheck(check, file);
    this.check.result.catch((e: Error) => fail(e, e instanceof DamageFound ? 'damaged' : 'unchecked'));
    this.opened = this.thread.request({ op: 'open', store: this.store, file, synchronous });
    this.opened.catch((e: Error) => fail(e, 'unopenable'));
    this.last = this.opened.catch(() => undefined);
  }

  /** Rejects once the store takes no more writes. */
  private usable(): Promise<void> {
    return this.opened.then(() => {
      if (this.failure) throw this.failure;
    });
  }

  submit(write: StoreWrite): Promise<void> {
    return new Promise((resolve, reject) => {
      this.pending.push({ write, waiter: { resolve: () => resolve(), reject } });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.send());
      }
    });
  }

  /** Sends up to MAX_MESSAGES_PER_REQUEST appended messages (and what came with them); the rest next turn. */
  private send(): void {
    this.scheduled = false;
    if (this.pending.length === 0) return;
    let messages = 0;
    let n = 0;
    while (n < this.pending.length && messages < MAX_MESSAGES_PER_REQUEST) {
      const w = this.pending[n++]!.write;
      if (w.kind === 'append') messages += w.messages.length;
    }
    const batch = this.pending.slice(0, n);
    this.pending = this.pending.slice(n);
    if (this.pending.length) {
      this.scheduled = true;
      setImmediate(() => this.send());
    }
    const { rows, payloads } = pack(batch.map((b) => b.write));
    const committed = this.usable().then(() => this.thread.request({ op: 'write', store: this.store, rows, payloads }, [payloads]));
    committed.then(
      () => batch.forEach((b) => b.waiter.resolve()),
      (e: Error) => {
        const error = storeWriteError(this.file, e);
        batch.forEach((b) => b.waiter.reject(error));
      },
    );
    this.last = committed.catch(() => undefined);
  }

  /** Sends what is queued and resolves once everything submitted so far has committed or failed. */
  drain(): Promise<void> {
    while (this.pending.length) this.send();
    return this.last;
  }

  /**
   * Deletes what the plan says, on the thread, in chunks; see SqliteStore.compact. Only once the check has
   * passed: the incremental vacuum after it moves pages about the file.
   */
  async compact(plan: CompactionPlan): Promise<{ deletedMessages: number }> {
    // A check that failed has made the store unusable: `usable` throws what onFailure made of it.
    await this.check.result.catch(() => undefined);
    await this.usable();
    const deletedMessages = await this.thread.request<number>({
      op: 'compact',
      store: this.store,
      plan: {
        watermarks: [...plan.watermarks],
        topics: [...plan.topics],
        keepFromSeq: [...plan.keepFromSeq],
      },
    });
    return { deletedMessages };
  }

  /** A seek (ack-state-transactions.ts), in one transaction on the thread, after the writes sent before it. */
  async seek(request: SeekRequest): Promise<number | undefined> {
    await this.usable();
    return this.thread.request<number | undefined>({ op: 'seek', store: this.store, request });
  }

  /** A snapshot (ack-state-transactions.ts), likewise. */
  async createSnapshot(request: SnapshotRequest): Promise<SnapshotRecord | SnapshotTooOld> {
    await this.usable();
    return this.thread.request<SnapshotRecord | SnapshotTooOld>({ op: 'snapshot', store: this.store, request });
  }

  /** Also waits for the whole-file check to end: a store's folder may be removed once it closed. */
  async close(): Promise<void> {
    const checkEnded = this.check.stop();
    await this.drain();
    await checkEnded;
    await this.thread.request({ op: 'close', store: this.store }).catch(() => undefined);
  }
}
