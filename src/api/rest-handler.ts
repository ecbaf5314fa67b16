import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ExportManager } from '../connector/export-manager.js';
import { formatDuration } from '../core/duration.js';
import { OrderlyError, type StatusCode } from '../core/errors.js';
import type { ReceivedMessage } from '../core/message.js';
import type { PubSubCore, Subscription } from '../core/pubsub-core.js';
import type { SubscriptionInput } from '../core/subscription-config.js';

/** Largest request body accepted: a 10 MiB publish in base64, plus envelope. */
const MAX_BODY = 14 * 1024 * 1024;

const HTTP_STATUS: Record<StatusCode, number> = {
  INVALID_ARGUMENT: 400,
  FAILED_PRECONDITION: 400,
  NOT_FOUND: 404,
  ALREADY_EXISTS: 409,
  RESOURCE_EXHAUSTED: 429,
  INTERNAL: 500,
};

class HttpError extends OrderlyError {}

type Route = { method: string; pattern: RegExp; handle: (m: RegExpExecArray, body: any) => Promise<unknown> };

/**
 * Pub/Sub's REST/JSON v1 API (proto3 JSON: camelCase, base64 `data`, `"600s"` durations, RFC 3339 times,
 * int64 as strings), as Google's emulator serves it beside gRPC. Errors use Google's JSON error body.
 */
export function restHandler(core: PubSubCore, exports?: ExportManager): (req: IncomingMessage, res: ServerResponse) => void {
  const sync = async () => {
    await exports?.sync();
  };
  const P = '/v1/projects/([^/:]+)';
  const routes: Route[] = [
    { method: 'PUT', pattern: new RegExp(`^${P}/topics/([^/:]+)$`), handle: async (m, b) => topicJson(await core.createTopic(name(m, 'topics'), { labels: b?.labels })) },
    { method: 'GET', pattern: new RegExp(`^${P}/topics/([^/:]+)$`), handle: async (m) => topicJson(core.getTopic(name(m, 'topics'))) },
    { method: 'PATCH', pattern: new RegExp(`^${P}/topics/([^/:]+)$`), handle: async (m, b) => topicJson(await core.updateTopic(name(m, 'topics'), { labels: b?.topic?.labels })) },
    { method: 'DELETE', pattern: new RegExp(`^${P}/topics/([^/:]+)$`), handle: async (m) => core.deleteTopic(name(m, 'topics')) },
    { method: 'GET', pattern: new RegExp(`^${P}/topics$`), handle: async (m) => ({ topics: core.listTopics(m[1]!).map(topicJson) }) },
    { method: 'GET', pattern: new RegExp(`^${P}/topics/([^/:]+)/subscriptions$`), handle: async (m) => ({ subscriptions: core.listTopicSubscriptions(name(m, 'topics')) }) },
    {
      method: 'POST',
      pattern: new RegExp(`^${P}/topics/([^/:]+):publish$`),
      handle: async (m, b) => ({
        messageIds: await core.publish(
          name(m, 'topics'),
          ((b?.messages ?? []) as { data?: string; attributes?: Record<string, string>; orderingKey?: string }[]).map((msg) => ({
            data: Buffer.from(msg.data ?? '', 'base64'),
            attributes: msg.attributes,
            orderingKey: msg.orderingKey,
          })),
        ),
      }),
    },
    {
      method: 'PUT',
      pattern: new RegExp(`^${P}/subscriptions/([^/:]+)$`),
      handle: async (m, b) => {
        const created = await core.createSubscription(name(m, 'subscriptions'), (b ?? {}) as SubscriptionInput);
        await sync();
        return subscriptionJson(core.getSubscription(created.name));
      },
    },
    { method: 'GET', pattern: new RegExp(`^${P}/subscriptions/([^/:]+)$`), handle: async (m) => subscriptionJson(core.getSubscription(name(m, 'subscriptions'))) },
    {
      method: 'PATCH',
      pattern: new RegExp(`^${P}/subscriptions/([^/:]+)$`),
      handle: async (m, b) => {
        const paths = String(b?.updateMask ?? '').split(',').filter(Boolean);
        const patch = Object.fromEntries(paths.map((p) => [p, b?.subscription?.[p] ?? null]));
        const updated = await core.updateSubscription(name(m, 'subscriptions'), patch);
        await sync();
        return subscriptionJson(updated);
      },
    },
    {
      method: 'DELETE',
      pattern: new RegExp(`^${P}/subscriptions/([^/:]+)$`),
      handle: async (m) => {
        await core.deleteSubscription(name(m, 'subscriptions'));
        await sync();
      },
    },
    { method: 'GET', pattern: new RegExp(`^${P}/subscriptions$`), handle: async (m) => ({ subscriptions: core.listSubscriptions(m[1]!).map(subscriptionJson) }) },
    {
      method: 'POST',
      pattern: new RegExp(`^${P}/subscriptions/([^/:]+):pull$`),
      handle: async (m, b) => ({
        receivedMessages: (await core.pull(name(m, 'subscriptions'), { maxMessages: b?.maxMessages || 100, waitMs: b?.returnImmediately ? 0 : 5_000 })).map(receivedJson),
      }),
    },
    { method: 'POST', pattern: new RegExp(`^${P}/subscriptions/([^/:]+):acknowledge$`), handle: async (m, b) => core.acknowledge(name(m, 'subscriptions'), b?.ackIds ?? []) },
    {
      method: 'POST',
      pattern: new RegExp(`^${P}/subscriptions/([^/:]+):modifyAckDeadline$`),
      handle: async (m, b) => core.modifyAckDeadline(name(m, 'subscriptions'), b?.ackIds ?? [], b?.ackDeadlineSeconds ?? 0),
    },
    {
      method: 'POST',
      pattern: new RegExp(`^${P}/subscriptions/([^/:]+):seek$`),
      handle: async (m, b) => {
        if (!b?.time) throw new HttpError('INVALID_ARGUMENT', 'time: required (snapshots are not supported)');
        const at = Date.parse(b.time);
        if (!Number.isFinite(at)) throw new HttpError('INVALID_ARGUMENT', `time: not an RFC 3339 timestamp: ${JSON.stringify(b.time)}`);
        await core.seek(name(m, 'subscriptions'), at);
        return {};
      },
    },
    {
      method: 'POST',
      pattern: new RegExp(`^${P}/subscriptions/([^/:]+):modifyPushConfig$`),
      handle: async (m, b) => core.updateSubscription(name(m, 'subscriptions'), { pushConfig: b?.pushConfig?.pushEndpoint ? b.pushConfig : null }),
    },
  ];

  return (req, res) => {
    const path = (req.url ?? '').split('?')[0]!;
    const route = routes.find((r) => r.method === req.method && r.pattern.test(path));
    void readBody(req)
      .then(async (body) => {
        if (!route) throw new HttpError('NOT_FOUND', `no such method: ${req.method} ${path}`);
        const result = await route.handle(route.pattern.exec(path)!, body);
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(result ?? {}));
      })
      .catch((e: unknown) => {
        const code: StatusCode = e instanceof OrderlyError ? e.code : 'INTERNAL';
        const status = e instanceof PayloadTooLarge ? 413 : HTTP_STATUS[code];
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { code: status, message: (e as Error).message, status: code } }));
      });
  };
}

class PayloadTooLarge extends OrderlyError {}

function name(m: RegExpExecArray, kind: 'topics' | 'subscriptions'): string {
  return `projects/${decodeURIComponent(m[1]!)}/${kind}/${decodeURIComponent(m[2]!)}`;
}

async function readBody(req: IncomingMessage): Promise<any> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > MAX_BODY) throw new PayloadTooLarge('INVALID_ARGUMENT', `request body over ${MAX_BODY} bytes`);
    chunks.push(c as Buffer);
  }
  if (!size) return undefined;
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch (e) {
    throw new HttpError('INVALID_ARGUMENT', `request body is not JSON: ${(e as Error).message}`);
  }
}

function topicJson(t: { name: string; labels: Record<string, string> }) {
  return { name: t.name, labels: t.labels };
}

function subscriptionJson(s: Subscription): Record<string, unknown> {
  const d = (x: number) => formatDuration(x);
  return {
    ...s,
    state: s.state === 'ACTIVE' ? 'ACTIVE' : 'RESOURCE_ERROR',
    messageRetentionDuration: d(s.messageRetentionDuration),
    retryPolicy: s.retryPolicy && { minimumBackoff: d(s.retryPolicy.minimumBackoff), maximumBackoff: d(s.retryPolicy.maximumBackoff) },
    expirationPolicy: s.expirationPolicy && { ttl: s.expirationPolicy.ttl === null ? '' : d(s.expirationPolicy.ttl) },
    bigqueryConfig: s.bigqueryConfig && { ...s.bigqueryConfig, state: s.state },
    cloudStorageConfig: s.cloudStorageConfig && { ...s.cloudStorageConfig, state: s.state },
  };
}

function receivedJson(m: ReceivedMessage) {
  return {
    ackId: m.ackId,
    deliveryAttempt: m.deliveryAttempt,
    message: {
      data: m.message.data.toString('base64'),
      attributes: m.message.attributes,
      messageId: m.message.messageId,
      publishTime: m.message.publishTime.toISOString(),
      orderingKey: m.message.orderingKey,
    },
  };
}
