import { setMaxListeners } from 'node:events';
import type { ConsumerSpec, SubscriptionHandle } from './consumer.js';
import { OrderlyError } from './errors.js';
import type { ReceivedMessage } from './message.js';
import { checkPushAttributes, headerValueProblem, messageHeaderProblem, post, PushEgressRefused, type PushEgress } from './push-egress.js';
import { PushWindow } from './push-window.js';
import type { PushConfigSpec } from './subscription-config.js';

/**
 * How long a closing core waits for the push requests still out: an answer within it is recorded (a 200
 * acked, not pushed again after a restart); requests still out then are cut, their messages come again.
 */
const SHUTDOWN_GRACE_MS = 5_000;
/** Pub/Sub's success codes for push; 102 (Processing) is an interim answer, an ack as soon as it comes. */
const PUSH_SUCCESS = new Set([102, 200, 201, 202, 204]);

/**
 * The User-Agent of Pub/Sub's push requests: endpoints tell pushes from other traffic by it (and logs
 * show it), so an Orderly push must not read as Node's default (none).
 */
const PUSH_USER_AGENT = 'CloudPubSub-Google';

/** The JSON body Pub/Sub POSTs to a push endpoint (wrapped form); fields at their default left out, as proto3 JSON does. */
export function pushEnvelope(subscription: string, m: ReceivedMessage): unknown {
  const publishTime = m.message.publishTime.toISOString();
  return {
    message: {
      ...(Object.keys(m.message.attributes).length ? { attributes: m.message.attributes } : {}),
      ...(m.message.data.length ? { data: m.message.data.toString('base64') } : {}),
      messageId: m.message.messageId,
      message_id: m.message.messageId,
      publishTime,
      publish_time: publishTime,
      ...(m.message.orderingKey ? { orderingKey: m.message.orderingKey } : {}),
    },
    subscription,
    ...(m.deliveryAttempt ? { deliveryAttempt: m.deliveryAttempt } : {}),
  };
}

/**
 * The HTTP request for one message: Pub/Sub's JSON envelope, or with payload unwrapping (`noWrapper`) the
 * message data as the body, and with `writeMetadata` the metadata in `x-goog-pubsub-*` headers and each
 * attribute as a header of its own, as Pub/Sub sends them. Throws PushEgressRefused for an attribute that
 * cannot be a header (the delivery fails, naming it).
 */
export function pushRequest(
  subscription: string,
  m: ReceivedMessage,
  config: PushConfigSpec,
): { body: string | Buffer; headers: Record<string, string> } {
  if (!config.noWrapper)
    return {
      body: JSON.stringify(pushEnvelope(subscription, m)),
      headers: headersByName({ 'user-agent': PUSH_USER_AGENT }, config.attributes, { 'content-type': 'application/json' }),
    };
  const headers = headersByName({ 'user-agent': PUSH_USER_AGENT }, config.attributes, { 'content-type': 'application/octet-stream' });
  if (config.noWrapper.writeMetadata) {
    for (const [name, value] of Object.entries(m.message.attributes)) {
      const bytes = utf8Bytes(value);
      const problem = messageHeaderProblem(name, bytes);
      if (problem) throw new PushEgressRefused(problem);
      headers[name.toLowerCase()] = bytes;
    }
    headers['x-goog-pubsub-subscription-name'] = subscription;
    headers['x-goog-pubsub-message-id'] = m.message.messageId;
    headers['x-goog-pubsub-publish-time'] = m.message.publishTime.toISOString();
    if (m.message.orderingKey) {
      const key = utf8Bytes(m.message.orderingKey);
      const problem = headerValueProblem(key);
      if (problem) {
        throw new PushEgressRefused(
          `the message's ordering key cannot be sent as the x-goog-pubsub-ordering-key header (payload unwrapping writes it there): it ${problem}`,
        );
      }
      headers['x-goog-pubsub-ordering-key'] = key;
    }
  }
  return { body: m.message.data, headers };
}

/**
 * Headers keyed by their lower-case name, each set replacing what the earlier ones gave that name in any
 * case. Keyed as given, Node sends of two spellings of a name the one that comes later among the keys,
 * whichever was set last: a message's `user-agent` attribute lost to a pushConfig `User-Agent`.
 */
function headersByName(...sets: Record<string, string>[]): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const set of sets) for (const [name, value] of Object.entries(set)) headers[name.toLowerCase()] = value;
  return headers;
}

/**
 * Why an endpoint that refused a push as unauthenticated may have: the subscription names an OIDC token
 * Orderly cannot mint, so none was sent. Without it the refusal read as the endpoint's own fault.
 */
function noTokenSent(config: PushConfigSpec): string {
  return config.oidcToken
    ? ' (Orderly sends no OIDC token: pushConfig.oidcToken is stored only, so the request carried no Authorization header)'
    : '';
}

/**
 * A header value from the message (an attribute, the ordering key) as its UTF-8 bytes, which is what Pub/Sub's
 * UTF-8 strings are on the wire; Node sends each code point of a header string as one byte, and refused a
 * key or attribute beyond Latin-1 (a key so could never be delivered, nor could anything after it).
 */
function utf8Bytes(value: string): string {
  return Buffer.from(value, 'utf8').toString('latin1');
}

/**
 * Push delivery: each message is its own HTTP POST to `pushConfig.pushEndpoint`; a 102, 200, 201, 202 or
 * 204 answer acks it (Pub/Sub's success codes),
 * anything else (a redirect included: they are not followed) or no answer within the ack deadline nacks
 * it. At most one message per ordering key is out at a time, as Pub/Sub does for ordered push; how many
 * are out in all, and the pauses after failures, is `PushWindow`. Where requests may go is `PushEgress`
 * (no link-local or metadata addresses unless allowed).
 */
export class PushDelivery {
  private inflight = 0;
  private stopped = false;
  private readonly handle: SubscriptionHandle;
  /**
   * Per ordering key, its request still out. A seek forgets leases while their requests run, and delivers
   * the key again at once: its next request waits for the one out, so an endpoint never has two of a key.
   */
  private readonly keyRequests = new Map<string, Promise<void>>();
  /** The requests out, with when each started: for `drain`, and `unanswered` in status. */
  private readonly requests = new Map<Promise<void>, number>();
  /** Cuts the requests still out when a drain's grace has passed. */
  private readonly cut = new AbortController();
  private readonly window = new PushWindow();
  /** Delivers again when a pause after a failed push ends. */
  private resume: NodeJS.Timeout | undefined;

  constructor(
    attach: (consumer: ConsumerSpec) => SubscriptionHandle,
    private readonly egress: PushEgress,
    /** A failure to record the outcome (the message will be delivered again). */
    private readonly onError: (e: unknown) => void,
  ) {
    // Each request out listens on `cut` until it ends: up to MAX_PUSH_WINDOW (more across a seek) at
    // once, which is no leak, but past 10 Node warns of one.
    setMaxListeners(0, this.cut.signal);
    this.handle = attach({
      affinity: 'push',
      maxPerKey: 1,
      room: () => ({ messages: this.stopped ? 0 : this.window.room(this.inflight, Date.now()), bytes: Number.MAX_SAFE_INTEGER }),
      deliver: (batch) => {
        for (const m of batch) this.sendInKeyOrder(m);
      },
    });
  }

  private sendInKeyOrder(m: ReceivedMessage): void {
    const key = m.message.orderingKey;
    if (!key) {
      this.send(m).catch(this.onError);
      return;
    }
    const before = this.keyRequests.get(key);
    const request = (before ? before.then(() => this.sendAfterWait(m)) : this.send(m)).catch(this.onError);
    this.keyRequests.set(key, request);
    const forget = () => {
      if (this.keyRequests.get(key) === request) this.keyRequests.delete(key);
    };
    request.then(forget, forget);
  }

  /**
   * A delivery that waited for its key's request ahead: not sent if it ended meanwhile (a second seek, the
   * subscription stopped or deleted); else its lease starts again, as its deadline is the request's timeout.
   */
  private async sendAfterWait(m: ReceivedMessage): Promise<void> {
    if (this.stopped || !this.handle.attached || !this.handle.isLive(m.ackId)) return;
    this.handle.modifyAckDeadline([m.ackId], this.handle.spec.ackDeadlineSeconds);
    await this.send(m);
  }

  private send(m: ReceivedMessage): Promise<void> {
    const request = this.request(m);
    this.requests.set(request, Date.now());
    const forget = () => this.requests.delete(request);
    request.then(forget, forget);
    return request;
  }

  private async request(m: ReceivedMessage): Promise<void> {
    this.inflight++;
    const { spec, subscription } = this.handle;
    const config = spec.pushConfig!;
    let failure: string | undefined;
    try {
      // A subscription stored before attributes were checked at creation is refused here instead.
      checkPushAttributes(config.attributes);
      const { body, headers } = pushRequest(subscription, m, config);
      const status = await post(config.pushEndpoint, body, headers, {
        timeoutMs: spec.ackDeadlineSeconds * 1000,
        egress: this.egress,
        signal: this.cut.signal,
      });
      if (PUSH_SUCCESS.has(status)) failure = undefined;
      else if (status >= 200 && status < 300)
        failure = `push endpoint answered HTTP ${status}, not a success for push (102, 200, 201, 202, 204)`;
      else if (status >= 300 && status < 400) failure = `push endpoint answered HTTP ${status}; redirects are not followed`;
      else failure = `push endpoint answered HTTP ${status}${status === 401 || status === 403 ? noTokenSent(config) : ''}`;
    } catch (e) {
      if (e instanceof PushEgressRefused || e instanceof OrderlyError) failure = e.message;
      // The request's own signal: the endpoint took the connection (or is being reached) and did not answer in time.
      else if ((e as Error).name === 'AbortError')
        failure = `push endpoint did not answer within the ack deadline (${spec.ackDeadlineSeconds}s)`;
      else failure = `push endpoint unreachable: ${(e as Error).message}`;
    } finally {
      this.inflight--;
    }
    // A request cut by a closing core has no outcome: the message comes again after the restart.
    if (!this.handle.attached || this.cut.signal.aborted) return;
    if (failure === undefined) {
      this.window.succeeded();
      await this.handle.acknowledge([m.ackId]);
    } else {
      this.pauseFor(this.window.failed(Date.now()));
      this.handle.modifyAckDeadline([m.ackId], 0, failure);
    }
    this.handle.kick();
  }

  private pauseFor(ms: number): void {
    if (ms === 0 || this.stopped) return;
    clearTimeout(this.resume);
    this.resume = setTimeout(() => this.handle.kick(), ms);
  }

  /** Stops pushing; the requests out still record their outcomes (the subscription lives on, e.g. as pull). */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.resume);
    this.handle.detach();
  }

  /**
   * The requests out unanswered for `ms` or more, if any: how many, and how long the oldest has waited. An
   * endpoint that takes requests and never answers fails none of them until the ack deadline (up to 600 s)
   * ends them: without this, status showed nothing wrong meanwhile.
   */
  unanswered(ms: number): string | undefined {
    const now = Date.now();
    const waits = [...this.requests.values()].map((since) => now - since).filter((wait) => wait >= ms);
    if (!waits.length) return undefined;
    // Without its query: a push URL often carries the token its endpoint checks (`?token=...`).
    const endpoint = new URL(this.handle.spec.pushConfig!.pushEndpoint);
    return `${waits.length} push request(s) to ${endpoint.origin}${endpoint.pathname} unanswered for ${ms / 1000} s or more, the oldest for ${Math.floor(Math.max(...waits) / 1000)} s`;
  }

  /** Settles once the requests out now have ended (none starts after `stop`). */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.requests.keys()]);
  }

  /**
   * Stops pushing for a core that closes: waits for the requests out to be answered and their outcomes
   * recorded, for at most SHUTDOWN_GRACE_MS, then cuts the rest. Without it a SIGTERM waited for an endpoint
   * that hangs up to the ack deadline (600 s), and the answers it got meanwhile were thrown away.
   */
  async drain(): Promise<void> {
    this.stop();
    const grace = setTimeout(() => this.cut.abort(), SHUTDOWN_GRACE_MS);
    await this.settled();
    clearTimeout(grace);
    // Their outcomes are recorded; what may still be open is an exchange acked on an interim 102, whose
    // final answer nobody waits for (it would hold its socket and timer up to the ack deadline).
    this.cut.abort();
  }
}
