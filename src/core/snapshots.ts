import { randomUUID } from 'node:crypto';
import type { SnapshotRecord, Store } from '../store/store.js';
import type { Clock } from './clock.js';
import type { SnapshotHold } from './compaction-plan.js';
import { AlreadyExistsError, FailedPreconditionError, InvalidArgumentError, NotFoundError } from './errors.js';
import { projectOf, resourceName } from './names.js';
import { checkLabels } from './labels.js';

/** A snapshot as the API shows it; `topic` is `_deleted-topic_` once its topic is gone. */
export interface Snapshot {
  name: string;
  topic: string;
  /** ms */
  expireTime: number;
  labels: Record<string, string>;
}

/** What UpdateSnapshot may change (the fields its update mask names). */
export interface SnapshotPatch {
  labels?: Record<string, string>;
  /** ms */
  expireTime?: number;
}

/** The subscription a snapshot is taken of. */
export interface SnapshotSource {
  name: string;
  topicUid: number;
  /** Its messageRetentionDuration, in seconds: older unacked messages are out of its backlog. */
  retentionSeconds: number;
}

/** Pub/Sub: a snapshot lives at most 7 days from its oldest message, and is refused if that leaves under an hour. */
export const SNAPSHOT_LIFETIME_MS = 7 * 86_400_000;
export const SNAPSHOT_MIN_LIFETIME_MS = 3_600_000;

/**
 * The core's snapshots (Pub/Sub's `projects/P/snapshots/S`): each holds a subscription's acknowledgement
 * state at its creation — every message unacked then, plus everything published to the topic later — until
 * it expires, 7 days after the oldest message it holds. The state itself lives in the store; this keeps
 * the records, applies Pub/Sub's rules, and treats an expired snapshot as gone (the core deletes it soon).
 */
export class Snapshots {
  private readonly records = new Map<string, SnapshotRecord>();
  /** Names being created: a second create of one of them is ALREADY_EXISTS, not a store conflict. */
  private readonly creating = new Set<string>();

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly projectId: string,
  ) {}

  async load(): Promise<void> {
    for (const rec of await this.store.listSnapshots()) this.records.set(rec.name, rec);
  }

  name(ref: string, field = 'snapshot'): string {
    return resourceName('snapshots', ref, this.projectId, field);
  }

  /**
   * Takes a snapshot of `source`; an empty `ref` gets a generated name in the source's project, as
   * Pub/Sub's gRPC API does. Refused (FAILED_PRECONDITION) when the oldest unacked message is so old that
   * the snapshot would live less than an hour.
   */
  async create(ref: string, source: SnapshotSource, labels: Record<string, string> = {}): Promise<SnapshotRecord> {
    const name = ref === '' ? `projects/${projectOf(source.name)}/snapshots/snapshot-${randomUUID()}` : this.name(ref, 'name');
    if (this.live(name) || this.creating.has(name)) throw new AlreadyExistsError('Snapshot', name);
    this.creating.add(name);
    try {
      const rec = await this.take(name, source, checkLabels(labels));
      this.records.set(name, rec);
      return rec;
    } finally {
      this.creating.delete(name);
    }
  }

  private async take(name: string, source: SnapshotSource, labels: Record<string, string>): Promise<SnapshotRecord> {
    const stale = this.records.get(name);
    if (stale) await this.remove(stale); // expired, not yet swept: its name is free
    const now = this.clock.now();
    const taken = await this.store.createSnapshot({
      name,
      subscription: source.name,
      topicUid: source.topicUid,
      labels: { ...labels },
      expiredBefore: now - source.retentionSeconds * 1000,
      now,
      lifetimeMs: SNAPSHOT_LIFETIME_MS,
      minLifetimeMs: SNAPSHOT_MIN_LIFETIME_MS,
    });
    if ('uid' in taken) return taken;
    const age = Math.round((now - taken.oldestPublishTime) / 60_000);
    throw new FailedPreconditionError(
      `a snapshot of ${source.name} would expire in less than 1 hour: its oldest unacked message is ${age} minutes old, and a snapshot lives at most 7 days from its oldest message`,
    );
  }

  /** The live (unexpired) snapshot; NOT_FOUND otherwise. */
  get(ref: string): SnapshotRecord {
    const name = this.name(ref);
    const rec = this.live(name);
    if (!rec) throw new NotFoundError('Snapshot', name);
    return rec;
  }

  /** The project's live snapshots, by name. */
  list(project: string): SnapshotRecord[] {
    return this.all().filter((s) => projectOf(s.name) === project);
  }

  /** Live snapshots of a topic, by name. */
  ofTopic(topicUid: number): SnapshotRecord[] {
    return this.all().filter((s) => s.topicUid === topicUid);
  }

  /**
   * Labels are replaced; a new expireTime must be in the future and no later than 7 days after the oldest
   * message the snapshot holds (the lifetime it got at creation): what it holds is not kept longer.
   */
  async update(ref: string, patch: SnapshotPatch): Promise<SnapshotRecord> {
    const rec = this.get(ref);
    const next = { ...rec };
    if (patch.labels) next.labels = checkLabels(patch.labels);
    if (patch.expireTime !== undefined) {
      const now = this.clock.now();
      if (!Number.isFinite(patch.expireTime) || patch.expireTime <= now || patch.expireTime > rec.maxExpireTime) {
        throw new InvalidArgumentError(
          'snapshot.expireTime',
          `must be after now and no later than ${new Date(rec.maxExpireTime).toISOString()} (7 days after the oldest message the snapshot holds), got ${describeTime(patch.expireTime)}`,
        );
      }
      next.expireTime = patch.expireTime;
    }
    await this.store.updateSnapshot(next);
    this.records.set(next.name, next);
    return next;
  }

  async delete(ref: string): Promise<void> {
    await this.remove(this.get(ref));
  }

  /** Deletes the snapshots that have expired (what they held becomes subject to compaction again). */
  async sweep(): Promise<number> {
    const now = this.clock.now();
    const expired = [...this.records.values()].filter((s) => s.expireTime <= now);
    for (const rec of expired) await this.remove(rec);
    return expired.length;
  }

  /** What the live snapshots keep from compaction. */
  holds(): SnapshotHold[] {
    return this.all().map((s) => ({ topicUid: s.topicUid, lowSeq: s.lowSeq }));
  }

  /** Every live snapshot (every project's), by name. */
  all(): SnapshotRecord[] {
    const now = this.clock.now();
    return [...this.records.values()].filter((s) => s.expireTime > now).sort((a, b) => (a.name < b.name ? -1 : 1));
  }

  private live(name: string): SnapshotRecord | undefined {
    const rec = this.records.get(name);
    return rec && rec.expireTime > this.clock.now() ? rec : undefined;
  }

  private async remove(rec: SnapshotRecord): Promise<void> {
    // Gone from memory first: a seek or a compaction plan that starts now no longer sees it.
    if (this.records.get(rec.name) === rec) this.records.delete(rec.name);
    await this.store.deleteSnapshot(rec.uid);
  }
}

function describeTime(ms: number): string {
  return Number.isFinite(ms) ? new Date(ms).toISOString() : String(ms);
}
