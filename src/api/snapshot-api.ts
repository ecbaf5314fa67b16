import { InvalidArgumentError } from '../core/errors.js';
import type { PubSubCore } from '../core/pubsub-core.js';
import type { Snapshot, SnapshotPatch } from '../core/snapshots.js';
import { pageOf, type PageRequest } from '../schema/paging.js';
import { timestamp, timestampMs, type ProtoDuration } from './proto-mapping.js';
import { maskFields } from './update-masks.js';
import { isSet } from './unsupported-fields.js';

/**
 * The snapshot RPCs of google.pubsub.v1 (Subscriber: CreateSnapshot, GetSnapshot, ListSnapshots,
 * UpdateSnapshot, DeleteSnapshot; Publisher: ListTopicSnapshots) over the core's snapshots, and the
 * mappings the REST routes share with them. Seek to a snapshot is part of the Seek RPC.
 */

export function snapshotToProto(s: Snapshot): Record<string, unknown> {
  return { name: s.name, topic: s.topic, expireTime: timestamp(s.expireTime), labels: s.labels };
}

/** proto3 JSON: the expire time in RFC 3339. */
export function snapshotJson(s: Snapshot): Record<string, unknown> {
  return { name: s.name, topic: s.topic, expireTime: new Date(s.expireTime).toISOString(), labels: s.labels };
}

/**
 * The patch an UpdateSnapshot mask selects: `labels` (replaced; cleared if the snapshot leaves them out)
 * and `expire_time` (must be given). Any other path, or none, is refused.
 */
export function snapshotPatch(paths: string[], snapshot: { labels?: Record<string, string>; expireTime?: number }): SnapshotPatch {
  const patch: SnapshotPatch = {};
  for (const [path, field] of maskFields(paths)) {
    if (field === 'labels') patch.labels = snapshot.labels ?? {};
    else if (field === 'expireTime') {
      if (snapshot.expireTime === undefined) throw new InvalidArgumentError('snapshot.expireTime', 'is required when the update mask names it');
      patch.expireTime = snapshot.expireTime;
    } else throw new InvalidArgumentError('updateMask', `unknown or read-only field path ${JSON.stringify(path)} (a snapshot's labels and expire_time can be updated)`);
  }
  return patch;
}

/** One page of the project's snapshots (ListSnapshots). */
export function snapshotPage(core: PubSubCore, project: string, page: PageRequest): { snapshots: Snapshot[]; nextPageToken: string } {
  const { items, nextPageToken } = pageOf(core.listSnapshots(project), page, (s) => s.name, 'ascending');
  return { snapshots: items, nextPageToken };
}

/** One page of the names of a topic's snapshots (ListTopicSnapshots). */
export function topicSnapshotPage(core: PubSubCore, topic: string, page: PageRequest): { snapshots: string[]; nextPageToken: string } {
  const { items, nextPageToken } = pageOf(core.listTopicSnapshots(topic), page, (name) => name, 'ascending');
  return { snapshots: items, nextPageToken };
}

/** CreateSnapshotRequest's `tags` (input only) are not kept by Orderly: refused rather than dropped. */
export function refuseSnapshotTags(tags: unknown): void {
  if (isSet(tags)) throw new InvalidArgumentError('tags', 'is not supported by Orderly');
}

type Handler = (request: any) => Promise<unknown>;

/** gRPC handlers: requests as proto-loader decodes them (defaults filled, Timestamps as {seconds, nanos}). */
export function snapshotRpcs(core: PubSubCore): { subscriber: Record<string, Handler>; publisher: Record<string, Handler> } {
  const project = (p: string) => p.replace(/^projects\//, '');
  return {
    subscriber: {
      createSnapshot: async (r) => {
        refuseSnapshotTags(r.tags);
        if (!r.subscription) throw new InvalidArgumentError('subscription', 'is required');
        return snapshotToProto(await core.createSnapshot(r.name, { subscription: r.subscription, labels: r.labels }));
      },
      getSnapshot: async (r) => snapshotToProto(core.getSnapshot(r.snapshot)),
      listSnapshots: async (r) => {
        const { snapshots, nextPageToken } = snapshotPage(core, project(r.project), { pageSize: r.pageSize, pageToken: r.pageToken });
        return { snapshots: snapshots.map(snapshotToProto), nextPageToken };
      },
      updateSnapshot: async (r) => {
        if (!r.snapshot) throw new InvalidArgumentError('snapshot', 'is required');
        if (!r.updateMask) throw new InvalidArgumentError('updateMask', 'is required');
        const expireTime = r.snapshot.expireTime ? timestampMs(r.snapshot.expireTime as ProtoDuration) : undefined;
        const patch = snapshotPatch(r.updateMask.paths, { labels: r.snapshot.labels, expireTime });
        return snapshotToProto(await core.updateSnapshot(r.snapshot.name, patch));
      },
      deleteSnapshot: async (r) => core.deleteSnapshot(r.snapshot),
    },
    publisher: {
      listTopicSnapshots: async (r) => topicSnapshotPage(core, r.topic, { pageSize: r.pageSize, pageToken: r.pageToken }),
    },
  };
}
