import { InvalidArgumentError } from '../core/errors.js';
import type { MessageInput } from '../core/message.js';
import type { PubSubCore } from '../core/pubsub-core.js';
import { topicFromProto, topicToProto } from './proto-mapping.js';
import type { PublisherRequests } from './pubsub-messages.js';
import { listPage, projectId, required, serviceHandlers, type RpcHandler } from './rpc.js';
import { snapshotHandlers } from './snapshot-api.js';
import { topicPatch } from './update-masks.js';

/** google.pubsub.v1.Publisher over the core (ListTopicSnapshots: snapshot-api.ts). */
export function publisherHandlers(core: PubSubCore): Record<string, RpcHandler> {
  const handlers = serviceHandlers<Omit<PublisherRequests, 'ListTopicSnapshots'>>({
    CreateTopic: async (t) => topicToProto(await core.createTopic(t.name, topicFromProto(t))),
    UpdateTopic: async (r) => {
      const topic = required(r.topic, 'topic');
      const patch = topicPatch(required(r.updateMask, 'updateMask').paths, topicFromProto(topic, 'topic.', false));
      return topicToProto(await core.updateTopic(topic.name, patch));
    },
    GetTopic: async (r) => topicToProto(core.getTopic(r.topic)),
    ListTopics: async (r) => {
      const project = projectId(r.project);
      return listPage(r, core.listTopics(project), (t) => t.name, 'topics', `projects/${project}`, topicToProto);
    },
    ListTopicSubscriptions: async (r) =>
      listPage(r, core.listTopicSubscriptions(r.topic), (s) => s, 'subscriptions', core.getTopic(r.topic).name),
    DeleteTopic: async (r) => core.deleteTopic(r.topic),
    DetachSubscription: async (r) => {
      await core.detachSubscription(r.subscription);
      return {};
    },
    Publish: async (r) => {
      const messages = r.messages;
      const keys = new Set(messages.map((m) => m.orderingKey));
      if (keys.size > 1) throw new InvalidArgumentError('messages', 'all messages of one publish request must share an ordering key');
      const inputs: MessageInput[] = messages.map((m) => ({ data: m.data, attributes: m.attributes, orderingKey: m.orderingKey }));
      return { messageIds: await core.publish(r.topic, inputs) };
    },
  });
  return { ...handlers, ...snapshotHandlers(core).publisher };
}
