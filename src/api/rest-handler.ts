import type { IncomingMessage, ServerResponse } from 'node:http';
import { formatDuration } from '../core/duration.js';
import { InvalidArgumentError, OrderlyError, type StatusCode } from '../core/errors.js';
import type { ReceivedMessage } from '../core/message.js';
import type { PubSubCore, Subscription } from '../core/pubsub-core.js';
import type { SubscriptionInput } from '../core/subscription-config.js';
import type { Logger } from '../log.js';
import { subscriptionPatch, topicPatch } from './update-masks.js';
import { UNAUTHENTICATED_MESSAGE } from './bearer-auth.js';
import { MAX_REST_BODY } from './endpoint-limits.js';
import type { z } from 'zod';
import type { PageRequest } from '../schema/paging.js';
import { parseBody, restBodies } from './rest-schemas.js';
import { refuseSnapshotTags, snapshotJson, snapshotPage, snapshotPatch, topicSnapshotPage } from './snapshot-api.js';
import { errorInfoJson } from './status-details.js';


const HTTP_STATUS: Record<StatusCode, number> = {
  INVALID_ARGUMENT: 400,
  FAILED_PRECONDITION: 400,
  NOT_FOUND: 404,
  ALREADY_EXISTS: 409,
  RESOURCE_EXHAUSTED: 429,
  INTERNAL: 500,
};

/** A request refused before its body was read: the connection is closed after the answer. */
class Refused extends Error {
  constructor(
    readonly httpStatus: number,
    readonly status: string,
    message: string,
  ) {
    super(message);
  }
}

type Route = { method: string; pattern: RegExp; handle: (m: RegExpExecArray, body: unknown, query: URLSearchParams) => Promise<unknown> };

export interface RestOptions {
  /** When set, every request's Authorization header must pass it. */
  authorization?: (header: string | undefined) => boolean;
  logger?: Logger;
}

/**
 * Pub/Sub's REST/JSON v1 API (proto3 JSON: camelCase, base64 `data`, `"600s"` durations, RFC 3339 times,
 * int64 as strings), as Google's emulator serves it beside gRPC. Every body is checked against its
 * route's schema first; errors use Google's JSON error body, a 4xx for anything wrong with the request.
 */
export function restHandler(core: PubSubCore, options: RestOptions = {}): (req: IncomingMessage, res: ServerResponse) => void {
  const P = '/v1/projects/([^/:]+)';
  const route = <S extends z.ZodType>(
    method: string,
    path: string,
    schema: S,
    handle: (m: RegExpExecArray, b: z.output<S>, query: URLSearchParams) => Promise<unknown>,
  ): Route => ({
    method,
    pattern: new RegExp(`^${P}${path}$`),
    handle: (m, raw, query) => handle(m, parseBody(schema, raw), query),
  });
  const B = restBodies;
  const topic = (m: RegExpExecArray, b?: { name?: string }) => resourceFromPath(core, 'topics', m, b?.name);
  const sub = (m: RegExpExecArray, b?: { name?: string }) => resourceFromPath(core, 'subscriptions', m, b?.name);
  const snap = (m: RegExpExecArray, b?: { name?: string }) => resourceFromPath(core, 'snapshots', m, b?.name);
  /** A subscription or snapshot named in a body: a bare id is in the URL's project. */
  const inProject = (m: RegExpExecArray, kind: 'subscriptions' | 'snapshots', ref: string) => (ref.includes('/') ? ref : `projects/${decodeSegment(m[1]!)}/${kind}/${ref}`);
  const routes: Route[] = [
    route('PUT', '/topics/([^/:]+)', B.topic, async (m, b) => topicJson(await core.createTopic(topic(m, b), { labels: b.labels }))),
    route('GET', '/topics/([^/:]+)', B.empty, async (m) => topicJson(core.getTopic(topic(m)))),
    route('PATCH', '/topics/([^/:]+)', B.updateTopic, async (m, b) => {
      const patch = topicPatch(b.updateMask ?? [], b.topic ?? {});
      return topicJson(await core.updateTopic(topic(m, b.topic), patch));
    }),
    route('DELETE', '/topics/([^/:]+)', B.empty, async (m) => core.deleteTopic(topic(m))),
    route('GET', '/topics', B.empty, async (m) => ({ topics: core.listTopics(decodeSegment(m[1]!)).map(topicJson) })),
    route('GET', '/topics/([^/:]+)/subscriptions', B.empty, async (m) => ({ subscriptions: core.listTopicSubscriptions(topic(m)) })),
    route('GET', '/topics/([^/:]+)/snapshots', B.empty, async (m, _b, q) => {
      const { snapshots, nextPageToken } = topicSnapshotPage(core, topic(m), pageQuery(q));
      return { snapshots, ...(nextPageToken ? { nextPageToken } : {}) };
    }),
    route('POST', '/topics/([^/:]+):publish', B.publish, async (m, b) => ({
      messageIds: await core.publish(topic(m), b.messages.map(({ data, attributes, orderingKey }) => ({ data, attributes, orderingKey }))),
    })),
    route('PUT', '/subscriptions/([^/:]+)', B.subscription, async (m, b) => {
      const { name: _name, topicMessageRetentionDuration: _t, state: _s, analyticsHubSubscriptionInfo: _a, detached, ...input } = b;
      if (detached) throw new InvalidArgumentError('detached', 'is set by DetachSubscription; a subscription cannot be created detached');
      return subscriptionJson(await core.createSubscription(sub(m, b), input as SubscriptionInput));
    }),
    route('GET', '/subscriptions/([^/:]+)', B.empty, async (m) => subscriptionJson(core.getSubscription(sub(m)))),
    route('PATCH', '/subscriptions/([^/:]+)', B.updateSubscription, async (m, b) => {
      const patch = subscriptionPatch(b.updateMask ?? [], (b.subscription ?? {}) as Record<string, unknown>);
      return subscriptionJson(await core.updateSubscription(sub(m, b.subscription), patch));
    }),
    route('DELETE', '/subscriptions/([^/:]+)', B.empty, async (m) => core.deleteSubscription(sub(m))),
    route('POST', '/subscriptions/([^/:]+):detach', B.empty, async (m) => core.detachSubscription(sub(m)).then(() => ({}))),
    route('GET', '/subscriptions', B.empty, async (m) => ({ subscriptions: core.listSubscriptions(decodeSegment(m[1]!)).map(subscriptionJson) })),
    route('GET', '/snapshots', B.empty, async (m, _b, q) => {
      const { snapshots, nextPageToken } = snapshotPage(core, decodeSegment(m[1]!), pageQuery(q));
      return { snapshots: snapshots.map(snapshotJson), ...(nextPageToken ? { nextPageToken } : {}) };
    }),
    route('PUT', '/snapshots/([^/:]+)', B.createSnapshot, async (m, b) => {
      refuseSnapshotTags(b.tags);
      if (!b.subscription) throw new InvalidArgumentError('subscription', 'is required');
      return snapshotJson(await core.createSnapshot(snap(m), { subscription: inProject(m, 'subscriptions', b.subscription), labels: b.labels }));
    }),
    route('GET', '/snapshots/([^/:]+)', B.empty, async (m) => snapshotJson(core.getSnapshot(snap(m)))),
    route('PATCH', '/snapshots/([^/:]+)', B.updateSnapshot, async (m, b) => {
      const patch = snapshotPatch(b.updateMask ?? [], b.snapshot ?? {});
      return snapshotJson(await core.updateSnapshot(snap(m, b.snapshot), patch));
    }),
    route('DELETE', '/snapshots/([^/:]+)', B.empty, async (m) => core.deleteSnapshot(snap(m)).then(() => ({}))),
    route('POST', '/subscriptions/([^/:]+):pull', B.pull, async (m, b) => ({
      receivedMessages: (await core.pull(sub(m), { maxMessages: b.maxMessages || 100, waitMs: b.returnImmediately ? 0 : 5_000 })).map(receivedJson),
    })),
    // On an exactly-once subscription invalid ack ids fail the call: 400 with ErrorInfo details naming them.
    route('POST', '/subscriptions/([^/:]+):acknowledge', B.acknowledge, async (m, b) => core.acknowledge(sub(m), b.ackIds ?? []).then(() => ({}))),
    route('POST', '/subscriptions/([^/:]+):modifyAckDeadline', B.modifyAckDeadline, async (m, b) =>
      core.modifyAckDeadline(sub(m), b.ackIds ?? [], b.ackDeadlineSeconds ?? 0).then(() => ({})),
    ),
    route('POST', '/subscriptions/([^/:]+):seek', B.seek, async (m, b) => {
      if (b.time !== undefined && b.snapshot !== undefined) throw new InvalidArgumentError('snapshot', 'and time are one choice (a seek has one target); got both');
      if (b.snapshot !== undefined) await core.seekToSnapshot(sub(m), inProject(m, 'snapshots', b.snapshot));
      else if (b.time !== undefined) await core.seek(sub(m), b.time);
      else throw new InvalidArgumentError('time', 'is required, or snapshot: a seek needs a target');
      return {};
    }),
    route('POST', '/subscriptions/([^/:]+):modifyPushConfig', B.modifyPushConfig, async (m, b) =>
      core.updateSubscription(sub(m), { pushConfig: b.pushConfig?.pushEndpoint ? b.pushConfig : null }).then(() => ({})),
    ),
  ];

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    if (options.authorization && !options.authorization(req.headers.authorization)) throw new Refused(401, 'UNAUTHENTICATED', UNAUTHENTICATED_MESSAGE);
    const url = req.url ?? '';
    const [path, search] = url.includes('?') ? [url.slice(0, url.indexOf('?')), url.slice(url.indexOf('?') + 1)] : [url, ''];
    const forPath = routes.filter((r) => r.pattern.test(path));
    const matched = forPath.find((r) => r.method === req.method);
    if (!matched) {
      const allowed = forPath.map((r) => r.method);
      throw new Refused(404, 'NOT_FOUND', allowed.length ? `no method ${req.method} on ${path} (allowed: ${allowed.join(', ')})` : `no such path: ${path}`);
    }
    const body = await readBody(req);
    const result = await matched.handle(matched.pattern.exec(path)!, body, new URLSearchParams(search));
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(result ?? {}));
  };

  return (req, res) => {
    handle(req, res).catch((e: unknown) => {
      let status: number;
      let code: string;
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (e instanceof Refused) {
        [status, code] = [e.httpStatus, e.status];
        // What is left of the request is not read: end the connection rather than drain it.
        if (!req.complete) headers.connection = 'close';
        if (status === 401) headers['www-authenticate'] = 'Bearer';
      } else if (e instanceof OrderlyError) {
        [status, code] = [HTTP_STATUS[e.code], e.code];
      } else {
        options.logger?.error({ err: e, method: req.method, path: req.url }, 'internal error in a REST request');
        [status, code] = [500, 'INTERNAL'];
      }
      const message = e instanceof OrderlyError || e instanceof Refused ? e.message : 'Orderly internal error (logged by the server)';
      if (res.headersSent) return void res.destroy();
      const details = e instanceof OrderlyError && e.errorInfo ? { details: [errorInfoJson(e.errorInfo)] } : {};
      res.writeHead(status, headers).end(JSON.stringify({ error: { code: status, message, status: code, ...details } }));
    });
  };
}

/** A topic, subscription or snapshot name from the URL; a name in the body, if any, must be the same one. */
function resourceFromPath(core: PubSubCore, kind: 'topics' | 'subscriptions' | 'snapshots', m: RegExpExecArray, bodyName: string | undefined): string {
  const name = `projects/${decodeSegment(m[1]!)}/${kind}/${decodeSegment(m[2]!)}`;
  const full = kind === 'topics' ? core.topicName(name, 'name') : kind === 'subscriptions' ? core.subscriptionName(name, 'name') : core.snapshotName(name, 'name');
  if (bodyName !== undefined && bodyName !== full) throw new InvalidArgumentError('name', `must match the name in the URL (${full}), got ${JSON.stringify(bodyName)}`);
  return full;
}

function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new InvalidArgumentError('request path', `malformed percent-encoding in ${JSON.stringify(segment.slice(0, 100))}`);
  }
}

/** A list call's paging parameters from the query string; any other parameter is refused, naming it. */
function pageQuery(query: URLSearchParams): PageRequest {
  const page: PageRequest = {};
  for (const [key, value] of query) {
    if (key === 'pageToken') page.pageToken = value;
    else if (key === 'pageSize') {
      if (!/^\d{1,9}$/.test(value)) throw new InvalidArgumentError('pageSize', `must be a non-negative integer, got ${JSON.stringify(value.slice(0, 40))}`);
      page.pageSize = Number(value);
    } else throw new InvalidArgumentError(key.slice(0, 100), 'unknown query parameter (a list takes pageSize and pageToken)');
  }
  return page;
}

/** The JSON body, or undefined when there is none; refuses more than MAX_REST_BODY bytes without reading them. */
function readBody(req: IncomingMessage): Promise<unknown> {
  const tooLarge = () => new Refused(413, 'INVALID_ARGUMENT', `request body over ${MAX_REST_BODY} bytes`);
  if (Number(req.headers['content-length']) > MAX_REST_BODY) return Promise.reject(tooLarge());
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (c: Buffer) => {
      size += c.length;
      if (size <= MAX_REST_BODY) return void chunks.push(c);
      req.off('data', onData);
      req.pause();
      reject(tooLarge());
    };
    req.on('data', onData);
    req.once('error', reject);
    req.once('end', () => {
      if (size > MAX_REST_BODY) return;
      if (!size) return resolve(undefined);
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      } catch (e) {
        reject(new InvalidArgumentError('request body', `is not JSON: ${(e as Error).message.slice(0, 200)}`));
      }
    });
  });
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
    // proto3 JSON leaves an unset field out: no ttl means the subscription never expires.
    expirationPolicy: s.expirationPolicy && (s.expirationPolicy.ttl === null ? {} : { ttl: d(s.expirationPolicy.ttl) }),
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
