/**
 * A lean Pub/Sub v1 client for the benchmarks: grpc-js straight on Google's pubsub.proto (loaded as the
 * server loads it), no client library in between, so what is measured is the endpoint, not a client's
 * batching, flow control or lease management.
 */
import * as grpc from '@grpc/grpc-js';
import { loadPubsubProto } from '../src/api/pubsub-proto.js';

interface ProtoReceived {
  ackId: string;
  message: { messageId: string; data: Buffer; orderingKey: string };
}

type Unary<Req, Res> = (request: Req, callback: (error: grpc.ServiceError | null, response: Res) => void) => void;

interface PublisherStub extends grpc.Client {
  createTopic: Unary<{ name: string }, unknown>;
  publish: Unary<{ topic: string; messages: { data: Buffer; orderingKey?: string }[] }, { messageIds: string[] }>;
}

interface SubscriberStub extends grpc.Client {
  createSubscription: Unary<{ name: string; topic: string; enableMessageOrdering: boolean; ackDeadlineSeconds: number }, unknown>;
  streamingPull(): grpc.ClientDuplexStream<Record<string, unknown>, { receivedMessages: ProtoReceived[] }>;
}

type StubConstructor<T> = new (address: string, credentials: grpc.ChannelCredentials, options?: grpc.ChannelOptions) => T;

function call<Req, Res>(method: Unary<Req, Res>, stub: grpc.Client, request: Req): Promise<Res> {
  return new Promise((resolve, reject) => method.call(stub, request, (error, response) => (error ? reject(error) : resolve(response))));
}

export interface DrainOptions {
  /** The stream's flow control (Google's client defaults to 1000). */
  maxOutstandingMessages: number;
  /** Called for each message received, before its ack goes out on the stream. */
  onMessage?: (m: ProtoReceived['message']) => void;
}

export class LeanPubsubClient {
  readonly project: string;
  private readonly publisher: PublisherStub;
  private readonly subscriber: SubscriberStub;

  constructor(host: string, project = 'orderly-local') {
    this.project = project;
    const v1 = (loadPubsubProto() as unknown as { google: { pubsub: { v1: Record<string, unknown> } } }).google.pubsub.v1;
    const credentials = grpc.credentials.createInsecure();
    // HTTP/2's default 64 KiB receive window would make the client, not the server, the limit: a server can
    // have only ~64 one-KB messages in flight per round trip of window updates.
    const options = { 'grpc.max_receive_message_length': 64 * 1024 * 1024, 'grpc-node.flow_control_window': 16 * 1024 * 1024 };
    this.publisher = new (v1.Publisher as StubConstructor<PublisherStub>)(host, credentials, options);
    this.subscriber = new (v1.Subscriber as StubConstructor<SubscriberStub>)(host, credentials, options);
  }

  topic(id: string): string {
    return `projects/${this.project}/topics/${id}`;
  }

  subscription(id: string): string {
    return `projects/${this.project}/subscriptions/${id}`;
  }

  async createTopic(id: string): Promise<void> {
    await call(this.publisher.createTopic, this.publisher, { name: this.topic(id) });
  }

  async createSubscription(id: string, topicId: string, ordered: boolean): Promise<void> {
    const request = { name: this.subscription(id), topic: this.topic(topicId), enableMessageOrdering: ordered, ackDeadlineSeconds: 60 };
    await call(this.subscriber.createSubscription, this.subscriber, request);
  }

  async publish(topicId: string, messages: { data: Buffer; orderingKey?: string }[]): Promise<string[]> {
    return (await call(this.publisher.publish, this.publisher, { topic: this.topic(topicId), messages })).messageIds;
  }

  /**
   * One StreamingPull stream until `count` distinct messages arrived; each response's ack ids are sent
   * back on the stream at once. Resolves with the number of deliveries (redeliveries included).
   */
  drain(subscriptionId: string, count: number, options: DrainOptions): Promise<number> {
    const stream = this.subscriber.streamingPull();
    const seen = new Set<string>();
    let deliveries = 0;
    return new Promise<number>((resolve, reject) => {
      stream.on('data', (response: { receivedMessages: ProtoReceived[] }) => {
        const ackIds: string[] = [];
        for (const r of response.receivedMessages) {
          deliveries++;
          seen.add(r.message.messageId);
          options.onMessage?.(r.message);
          ackIds.push(r.ackId);
        }
        stream.write({ ackIds });
        if (seen.size >= count) stream.end();
      });
      // The server ends its side after ours; by then it has read every ack sent before.
      stream.on('status', (status: grpc.StatusObject) =>
        status.code === grpc.status.OK ? resolve(deliveries) : reject(new Error(`StreamingPull ended: ${status.details}`)),
      );
      stream.on('error', reject);
      stream.write({
        subscription: this.subscription(subscriptionId),
        streamAckDeadlineSeconds: 60,
        maxOutstandingMessages: options.maxOutstandingMessages,
        clientId: `bench-${process.pid}`,
      });
    });
  }

  close(): void {
    this.publisher.close();
    this.subscriber.close();
  }
}
