/**
 * Child process of the memory benchmark's StreamingPull path: the lean gRPC client draining a subscription
 * (acks on the stream), kept out of the server's process so the server's peak RSS is the server's alone.
 * Args: host, project, subscription id, message count.
 */
import { exitWithParent, reply } from './child.js';
import { LeanPubsubClient } from './grpc-client.js';

exitWithParent();
const [host, project, subscription, count] = process.argv.slice(2);
const client = new LeanPubsubClient(host!, project);
// Flow control as Google's client defaults it.
const deliveries = await client.drain(subscription!, Number(count), { maxOutstandingMessages: 1000 });
client.close();
await reply({ deliveries });
// The parent watch (exitWithParent) holds the IPC channel open: leave explicitly.
process.exit(0);
