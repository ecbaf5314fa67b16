/**
 * The latency benchmark's publisher with Google's client, in a process of its own as a publishing service
 * would be: its 2,000 publish calls a second (each its own RPC, one message per ordering key) then do not
 * share an event loop with the subscriber whose delivery times are measured. Replies with each message's
 * send and publish-resolved times on the shared clock.
 */
import { PubSub } from '@google-cloud/pubsub';
import { exitWithParent, reply } from './child.js';
import { clockMs, latencyMessage, pace, TOTAL } from './latency-pace.js';
import { tracePublisher, TRACING, type PublisherTrace } from './latency-trace.js';
import { watchEventLoop } from './process-stats.js';

export interface PublisherInput {
  apiEndpoint: string;
  projectId: string;
  topic: string;
}

export interface PublisherResult {
  rate: number;
  sentAt: number[];
  publishedAt: number[];
  errors: string[];
  /** The publisher's longest event-loop block while it published, ms. */
  maxLoopDelayMs: number;
  /** With BENCH_LATENCY_TRACE. */
  trace?: PublisherTrace;
}

exitWithParent();
const input = JSON.parse(process.argv[2]!) as PublisherInput;
process.env.METADATA_SERVER_DETECTION = 'none';
const pubsub = new PubSub({ projectId: input.projectId, apiEndpoint: input.apiEndpoint, emulatorMode: true });
const topic = pubsub.topic(input.topic);
// The client's default batching (up to 100 messages or 10 ms): what a user gets.
topic.setPublishOptions({ messageOrdering: true });
const sentAt = new Float64Array(TOTAL);
const publishedAt = new Float64Array(TOTAL);
const errors: string[] = [];
const pending: Promise<void>[] = [];
const loop = await watchEventLoop();
const tracing = TRACING ? tracePublisher() : undefined;
const rate = await pace((i) => {
  sentAt[i] = clockMs();
  pending.push(
    topic
      .publishMessage(latencyMessage(i))
      .then(() => void (publishedAt[i] = clockMs()))
      .catch((e: unknown) => void errors.push(String(e))),
  );
});
await Promise.all(pending);
const trace = tracing?.stop();
const maxLoopDelayMs = await loop.stop();
await pubsub.close();
const result: PublisherResult = { rate, sentAt: Array.from(sentAt), publishedAt: Array.from(publishedAt), errors, maxLoopDelayMs, trace };
await reply(result);
process.exit(0);
