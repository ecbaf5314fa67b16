import { DebugMessage, Duration, SubscriptionCloseBehaviors, type Message, type PubSub, type Subscription } from '@google-cloud/pubsub';
import type { google } from '@google-cloud/pubsub/build/protos/protos.js';
import type { ReceivedMessage } from '../../core/message.js';
import type { SubscriptionSpec } from '../../core/subscription-config.js';
import type { Logger } from '../../log.js';
import { Backoff } from '../backoff.js';
import { KeyTailGuard } from './key-tail-guard.js';
import { ReplayDetector } from './replay-detector.js';
import { describeRemoteError, endpointLabel, type RemoteEndpoint } from './remote-endpoint.js';
import { REFUSED_RETRY_MS, SourceError, type DeliveryHandle, type ExportSource, type SourceConsumer, type SourceStatus } from './source.js';

/** The export sections a remote export may carry (the same fields as a local export subscription). */
export type ExportSection = Pick<SubscriptionSpec, 'bigqueryConfig' | 'cloudStorageConfig' | 'exportConfig'>;

export interface RemoteSourceOptions {
  client: PubSub;
  endpoint: RemoteEndpoint;
  /** The remote subscription's full name. */
  subscription: string;
  /** The job asks for per-key order: a remote subscription with ordering off is refused. */
  ordered: boolean;
  section: ExportSection;
  /** The runner's budget: the client's flow control, so it never holds more than the runner takes. */
  budget: { messages: number; bytes: number };
  /** How long the client keeps extending a held message's lease (an open file, an upload), in minutes. */
  maxExtensionMinutes: number;
  /** StreamingPull streams per worker. */
  streams: number;
  logger: Logger;
  backoff?: () => Backoff;
}

/** How long a call reading the subscription's settings may take before it counts as unreachable. */
const METADATA_TIMEOUT_MS = 10_000;
/**
 * How long closing a stream waits for the acks and nacks already given to go out. Google's client sends them in
 * batches and drops what is still queued when it closes without waiting: the ack that overflows a batch of
 * 3,000 waits for the full batch's call to return, and a worker stops right after acking its final flush.
 */
const CLOSE_TIMEOUT = Duration.from({ seconds: 10 });
const CANCELLED = 1;
/** Stream ends the client retries as a matter of course (its stream timeout, a cancel): OK, CANCELLED, DEADLINE_EXCEEDED. */
const ROUTINE_STREAM_ENDS = [0, CANCELLED, 4];

/**
 * An existing subscription on a remote Pub/Sub v1 endpoint (Google Cloud Pub/Sub, or any compatible
 * one), read through Google's client with StreamingPull: its flow control sized by the runner's budget,
 * its lease management extending what the runner holds (up to `maxExtensionMinutes`), each key's
 * messages in the order the stream brings them. A nack tells Pub/Sub to redeliver the key's tail in
 * order; this worker then nacks, never delivers, every later message of that key it holds or receives
 * until the key starts over (KeyTailGuard). Dead letters follow the remote subscription's own
 * deadLetterPolicy (each nack counts a delivery attempt there). A stream that fails is reopened with
 * backoff, its state and reason shown in status.
 */
export class RemoteSource implements ExportSource {
  readonly subscription: string;
  private readonly location: string;
  private state: SourceStatus['state'] = 'connecting';
  private error?: string;
  private retries = 0;
  private sub?: Subscription;
  private consumer?: SourceConsumer;
  /** Delivery id -> the client's message, while the runner holds it. */
  private readonly held = new Map<string, Message>();
  private nextDelivery = 0;
  private readonly guard = new KeyTailGuard();
  private readonly replays = new ReplayDetector();
  private incoming: ReceivedMessage[] = [];
  private detached = false;
  private readonly backoff: Backoff;
  private reopenTimer?: NodeJS.Timeout;
  private probing?: NodeJS.Timeout;
  private spec?: SubscriptionSpec;

  constructor(private readonly options: RemoteSourceOptions) {
    this.subscription = options.subscription;
    this.location = endpointLabel(options.endpoint);
    this.backoff = options.backoff?.() ?? new Backoff();
  }

  async prepare(): Promise<SubscriptionSpec> {
    const { client, subscription, endpoint, ordered, section } = this.options;
    let metadata: google.pubsub.v1.ISubscription;
    try {
      // Google's credentials first, on their own: a failure there inside a call also leaves a rejection
      // the client never handles.
      if (!endpoint.endpoint) await client.auth.getClient();
      [metadata] = await client.subscription(subscription).getMetadata({ timeout: METADATA_TIMEOUT_MS, retry: null });
    } catch (e) {
      throw this.failed(describeRemoteError(e, subscription, endpoint));
    }
    if (metadata.pushConfig?.pushEndpoint || metadata.bigqueryConfig?.table || metadata.cloudStorageConfig?.bucket) {
      throw this.failed(
        new SourceError(
          `remote subscription ${subscription} at ${this.location} is a push or export subscription; an Orderly export reads a pull subscription`,
          'refused',
        ),
      );
    }
    if (metadata.detached) {
      throw this.failed(
        new SourceError(
          `remote subscription ${subscription} at ${this.location} is detached from its topic and receives no messages; export from another subscription`,
          'refused',
        ),
      );
    }
    if (ordered && !metadata.enableMessageOrdering) {
      throw this.failed(
        new SourceError(
          `remote subscription ${subscription} at ${this.location} has message ordering off, but the job asks for per-key order ` +
            '(enableMessageOrdering: true); ordering is fixed when a subscription is created: create one with --enable-message-ordering, ' +
            'or set enableMessageOrdering: false for this export',
          'refused',
        ),
      );
    }
    this.spec = specOf(metadata, section);
    // Reachable: streaming starts once the sink is open (a standby waits here).
    this.state = 'connecting';
    this.error = undefined;
    return this.spec;
  }

  private failed(e: SourceError): SourceError {
    this.state = e.kind;
    this.error = e.message;
    this.retries++;
    return e;
  }

  attach(consumer: SourceConsumer): DeliveryHandle {
    // Attached again after a detach: a runner that stood down as a standby and took the sink back.
    this.detached = false;
    this.consumer = consumer;
    this.open();
    const detached = () => this.detached;
    return {
      get attached() {
        return !detached();
      },
      isLive: (id) => this.held.has(id),
      acknowledge: async (ids) => {
        for (const id of ids) {
          const m = this.held.get(id);
          if (!m) continue;
          this.forget(id, m);
          m.ack();
        }
      },
      nack: (ids) => {
        for (const id of ids) this.nack(id);
      },
      detach: () => this.detach(),
    };
  }

  /** Nacks a delivery and every later delivery of its key this worker holds; the key waits to start over. */
  private nack(id: string): void {
    const m = this.held.get(id);
    if (!m) return;
    this.forget(id, m);
    m.nack();
    const key = m.orderingKey ?? '';
    if (!this.spec?.enableMessageOrdering || key === '') return;
    const later: string[] = [];
    for (const [other, next] of this.held) {
      if ((next.orderingKey ?? '') !== key || Number(other) < Number(id)) continue;
      this.forget(other, next);
      next.nack();
      later.push(next.id);
    }
    this.guard.fail(key, m.id, Date.now(), later);
  }

  private forget(id: string, m: Message): void {
    this.held.delete(id);
    this.replays.release(m.orderingKey ?? '');
  }

  /**
   * A seek back on the remote replays `key` from a message published at `at`, before messages of the key
   * this worker holds. Those are nacked (they come again after it, in order; the ones an open file has
   * written are recognised there by id), and the runner finalizes what the connector holds before it
   * writes the replay, as it does for a seek of the embedded core.
   */
  private replayed(key: string, at: number): void {
    let latest = 0;
    let replay = false;
    for (const [id, m] of this.held) {
      if ((m.orderingKey ?? '') !== key) continue;
      const published = m.publishTime.getTime();
      if (published <= at) latest = Math.max(latest, published);
      else {
        replay = true;
        this.forget(id, m);
        m.nack();
      }
    }
    this.replays.settle(key, latest);
    if (replay) this.consumer?.sought?.();
  }

  private open(): void {
    const { client, subscription, budget, maxExtensionMinutes, streams } = this.options;
    const sub = client.subscription(subscription, {
      flowControl: { maxMessages: budget.messages, maxBytes: budget.bytes, allowExcessMessages: false },
      maxExtensionTime: Duration.from({ minutes: maxExtensionMinutes }),
      streamingOptions: { maxStreams: streams },
      closeOptions: { behavior: SubscriptionCloseBehaviors.WaitForProcessing, timeout: CLOSE_TIMEOUT },
    });
    sub.on('message', (m: Message) => this.receive(sub, m));
    sub.on('error', (e: unknown) => this.streamFailed(e));
    sub.on('debug', (d: unknown) => this.noteTrouble(d));
    this.sub = sub;
    this.streaming();
  }

  /** Messages can flow again: status says so, and counts failed attempts afresh ("since it last streamed"). */
  private streaming(): void {
    this.state = 'streaming';
    this.error = undefined;
    this.retries = 0;
    this.backoff.reset();
  }

  /**
   * The client retries a broken stream, and a failed ack or lease extension, by itself and says so here:
   * status and the log show it until the endpoint answers again. Streams also end routinely (DEADLINE_EXCEEDED
   * at their own deadline, CANCELLED): not a failure. An ack or lease extension (a batch, naming its ack ids)
   * that ran out of time is one: the endpoint did not answer (a frozen process, a network dropping packets),
   * and while nothing refuses a connection, no stream ends to say so.
   */
  private noteTrouble(d: unknown): void {
    const error = d instanceof DebugMessage ? d.error : undefined;
    const code = (error as { code?: unknown } | undefined)?.code;
    if (typeof code !== 'number' || this.state !== 'streaming') return;
    const batch = [d, error].some((e) => Array.isArray((e as { ackIds?: unknown }).ackIds));
    if (batch ? code === CANCELLED : ROUTINE_STREAM_ENDS.includes(code)) return;
    this.state = 'retrying';
    this.error = describeRemoteError(error, this.subscription, this.options.endpoint).message;
    this.options.logger.warn(
      { subscription: this.subscription, error: this.error },
      'the remote endpoint failed the stream, an ack or a lease extension; asking it with backoff until it answers',
    );
    this.probe();
  }

  /** While the client retries a broken stream: asks the endpoint, with backoff, until it answers (then streaming again). */
  private probe(): void {
    if (this.probing || this.detached) return;
    this.probing = setTimeout(() => {
      this.probing = undefined;
      if (this.state !== 'retrying' || this.detached || !this.sub) return;
      this.options.client
        .subscription(this.subscription)
        .getMetadata({ timeout: METADATA_TIMEOUT_MS, retry: null })
        .then(
          () => {
            if (this.state !== 'retrying') return;
            this.streaming();
            this.options.logger.info({ subscription: this.subscription }, 'the remote endpoint answers again; streaming');
          },
          (e: unknown) => {
            this.error = describeRemoteError(e, this.subscription, this.options.endpoint).message;
            this.retries++;
            this.probe();
          },
        );
    }, this.backoff.next());
  }

  private receive(from: Subscription, m: Message): void {
    // A stream being closed (or this source detached): the message comes again.
    if (this.detached || from !== this.sub) {
      m.nack();
      return;
    }
    if (this.state !== 'streaming') this.streaming();
    const key = m.orderingKey ?? '';
    if (!this.guard.admit(key, m.id, m.received)) {
      m.nack();
      return;
    }
    const publishedAt = m.publishTime.getTime();
    if (this.spec?.enableMessageOrdering && key !== '' && this.replays.mayReplay(key, publishedAt)) this.replayed(key, publishedAt);
    const id = String(++this.nextDelivery);
    this.held.set(id, m);
    this.replays.hold(key, publishedAt);
    this.incoming.push({
      ackId: id,
      message: {
        messageId: m.id,
        publishTime: new Date(m.publishTime.getTime()),
        data: m.data,
        attributes: { ...m.attributes },
        orderingKey: key,
        // Pub/Sub numbers no key's messages: sinks recognise these by message id.
        sequence: 0,
      },
      deliveryAttempt: m.deliveryAttempt ?? 0,
    });
    // The client hands messages over one at a time; the runner takes them in batches.
    if (this.incoming.length === 1) setImmediate(() => this.deliverIncoming());
  }

  private deliverIncoming(): void {
    const batch = this.incoming;
    this.incoming = [];
    // Nacked meanwhile (a failure of their key) or detached: not delivered.
    const live = batch.filter((r) => this.held.has(r.ackId));
    if (live.length) this.consumer?.deliver(live);
  }

  /** The client gave up on the stream (it retries transient failures itself): reopened after a backoff. */
  private streamFailed(e: unknown): void {
    const error = describeRemoteError(e, this.subscription, this.options.endpoint);
    this.state = error.kind;
    this.error = error.message;
    this.retries++;
    this.options.logger.error(
      { subscription: this.subscription, error: error.message },
      'remote subscription stream failed; reopening it with backoff',
    );
    void this.closeStream();
    if (this.detached || this.reopenTimer) return;
    const delay = error.kind === 'refused' ? REFUSED_RETRY_MS : this.backoff.next();
    this.reopenTimer = setTimeout(() => {
      this.reopenTimer = undefined;
      this.prepare().then(
        () => {
          if (!this.detached) this.open();
        },
        (failure: unknown) => this.streamFailed(failure),
      );
    }, delay);
  }

  /**
   * Closes the stream once the acks and nacks given are through (within CLOSE_TIMEOUT). What this worker
   * holds unsettled is nacked first, so it comes again and the close need not wait for it.
   */
  private async closeStream(): Promise<void> {
    const sub = this.sub;
    this.sub = undefined;
    for (const m of this.held.values()) m.nack();
    this.held.clear();
    this.replays.clear();
    this.incoming = [];
    if (!sub) return;
    // Closed before its listeners go: removing the last 'message' listener makes the client close the
    // stream by itself, without waiting for the acks just sent.
    await sub
      .close()
      .catch((e: unknown) =>
        this.options.logger.warn({ subscription: this.subscription, error: (e as Error).message }, 'closing the remote stream failed'),
      );
  }

  private async detach(): Promise<void> {
    this.detached = true;
    // Not streaming: status says so while the runner waits (as a standby) to attach again.
    this.state = 'connecting';
    clearTimeout(this.reopenTimer);
    clearTimeout(this.probing);
    await this.closeStream();
  }

  setState(): void {
    // A remote subscription keeps no sink state of Orderly's: status shows the export's state.
  }

  status(): SourceStatus {
    return { location: this.location, state: this.state, error: this.error, retries: this.retries, keysWaiting: this.guard.waiting };
  }
}

/** The subscription's settings as the export uses them: the remote subscription's own, and the job's export section. */
function specOf(m: google.pubsub.v1.ISubscription, section: ExportSection): SubscriptionSpec {
  const seconds = (d: google.protobuf.IDuration | null | undefined, fallback: number) =>
    d?.seconds !== undefined && d.seconds !== null ? Number(d.seconds) : fallback;
  const spec: SubscriptionSpec = {
    topic: m.topic ?? '',
    ackDeadlineSeconds: m.ackDeadlineSeconds || 10,
    messageRetentionDuration: seconds(m.messageRetentionDuration, 7 * 86400),
    retainAckedMessages: m.retainAckedMessages === true,
    enableMessageOrdering: m.enableMessageOrdering === true,
    filter: m.filter ?? '',
    enableExactlyOnceDelivery: m.enableExactlyOnceDelivery === true,
    labels: { ...(m.labels ?? {}) },
    ...section,
  };
  if (m.deadLetterPolicy?.deadLetterTopic) {
    spec.deadLetterPolicy = {
      deadLetterTopic: m.deadLetterPolicy.deadLetterTopic,
      maxDeliveryAttempts: m.deadLetterPolicy.maxDeliveryAttempts || 5,
    };
  }
  if (m.retryPolicy)
    spec.retryPolicy = {
      minimumBackoff: seconds(m.retryPolicy.minimumBackoff, 10),
      maximumBackoff: seconds(m.retryPolicy.maximumBackoff, 600),
    };
  return spec;
}
