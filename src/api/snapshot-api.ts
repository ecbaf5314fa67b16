import { InvalidArgumentError } from '../core/errors.js';
import type { PubSubCore } from '../core/pubsub-core.js';
import type { Snapshot, SnapshotPatch } from '../core/snapshots.js';
import { timestamp, timestampMs } from './proto-mapping.js';
import type { ProtoObject, PublisherRequests, SubscriberRequests } from './pubsub-messages.js';
import { listPage, projectId, required, serviceHandlers, type RpcHandler } from './rpc.js';
import { maskFields } from './update-masks.js';
import { isSet } from './unsupported-fields.js';

/**
 * The snapshot RPCs of google.pubsub.v1 (Subscriber: CreateSnapshot, GetSnapshot, ListSnapshots,
 * UpdateSnapshot, DeleteSnapshot; Publisher: ListTopicSnapshots) over the core's snapshots, for gRPC and
 * REST alike. Seek to a snapshot is part of the Seek RPC.
 */

export function snapshotToProto(s: Snapshot): ProtoObject {
  return { name: s.name, topic: s.topic, expireTime: timestamp(s.expireTime), labels: s.labels };
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
      if (snapshot.expireTime === undefined)
        throw new InvalidArgumentError('snapshot.expireTime', 'is required when the update mask names it');
      patch.expireTime = snapshot.expireTime;
    } else
      throw new InvalidArgumentError(
        'updateMask',
        `unknown or read-only field path ${JSON.stringify(path)} (a snapshot's labels and expire_time can be updated)`,
      );
  }
  return patch;
}

/** CreateSnapshotRequest's `tags` (input only) are not kept by Orderly: refused rather than dropped. */
export function refuseSnapshotTags(tags: unknown): void {
  if (isSet(tags)) throw new InvalidArgumentError('tags', 'is not supported by Orderly');
}

/** A bare id names a resource in the project of `owner` (a REST body's `"subscription": "orders"` means the URL's project). */
export function inProjectOf(owner: unknown, kind: 'topics' | 'subscriptions' | 'snapshots', ref: string): string {
  const project = typeof owner === 'string' ? /^projects\/([^/]+)\//.exec(owner)?.[1] : undefined;
  return project && ref && !ref.includes('/') ? `projects/${project}/${kind}/${ref}` : ref;
}

/** The Subscriber methods this file answers (subscriber-service.ts answers the others). */
export type SnapshotMethod = 'CreateSnapshot' | 'GetSnapshot' | 'ListSnapshots' | 'UpdateSnapshot' | 'DeleteSnapshot';

export function snapshotHandlers(core: PubSubCore): { subscriber: Record<string, RpcHandler>; publisher: Record<string, RpcHandler> } {
  return {
    subscriber: serviceHandlers<Pick<SubscriberRequests, SnapshotMethod>>({
      CreateSnapshot: async (r) => {
        refuseSnapshotTags(r.tags);
        if (!r.subscription) throw new InvalidArgumentError('subscription', 'is required');
        return snapshotToProto(
          await core.createSnapshot(r.name, { subscription: inProjectOf(r.name, 'subscriptions', r.subscription), labels: r.labels }),
        );
      },
      GetSnapshot: async (r) => snapshotToProto(core.getSnapshot(r.snapshot)),
      ListSnapshots: async (r) => {
        const project = projectId(r.project);
        return listPage(r, core.listSnapshots(project), (s) => s.name, 'snapshots', `projects/${project}`, snapshotToProto);
      },
      UpdateSnapshot: async (r) => {
        const snapshot = required(r.snapshot, 'snapshot');
        const expireTime = snapshot.expireTime ? timestampMs(snapshot.expireTime, 'snapshot.expireTime') : undefined;
        const patch = snapshotPatch(required(r.updateMask, 'updateMask').paths, { labels: snapshot.labels, expireTime });
        return snapshotToProto(await core.updateSnapshot(snapshot.name, patch));
      },
      DeleteSnapshot: async (r) => core.deleteSnapshot(r.snapshot),
    }),
    publisher: serviceHandlers<Pick<PublisherRequests, 'ListTopicSnapshots'>>({
      ListTopicSnapshots: async (r) =>
        listPage(r, core.listTopicSnapshots(r.topic), (name) => name, 'snapshots', core.getTopic(r.topic).name),
    }),
  };
}
