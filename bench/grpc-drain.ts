/**
 * Child process of the memory benchmark's StreamingPull path: the lean gRPC client draining a subscription
 * (acks on the stream), kept out of the server's process so the server's peak RSS is the server's alone.
 * Args: host, project, subscription id, message count.
 */
import { reply } from './child.js';
import { LeanPubsubClient } from './grpc-client.js';

const [host, project, subscription, count] = process.argv.slice(2);
const client = new LeanPubsubClient(host!, project!);
// Flow control as Google's client defaults it.
const deliveries = await client.drain(subscription!, Number(count), { maxOutstandingMessages: 1000 });
client.close();
await reply({ deliveries });
