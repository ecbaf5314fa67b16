/**
 * A gRPC Publisher (Google's protos, as `orderly serve` loads them) that answers every Publish at once with
 * message ids and keeps nothing, in a process of its own. The latency benchmark's publisher against it shows
 * what Google's client alone manages on this machine in the same run: a miss it shares is the client's (or
 * the machine's), not Orderly's server's. Replies with its port.
 */
import * as grpc from '@grpc/grpc-js';
import { loadPubsubProto } from '../src/api/pubsub-proto.js';
import { exitWithParent, reply } from './child.js';

exitWithParent();
const publisher = 'google.pubsub.v1.Publisher'
  .split('.')
  .reduce<grpc.GrpcObject>((ns, part) => ns[part] as grpc.GrpcObject, loadPubsubProto()) as unknown as grpc.ServiceClientConstructor;
let published = 0;
const server = new grpc.Server();
server.addService(publisher.service, {
  Publish: (call: grpc.ServerUnaryCall<{ messages: unknown[] }, unknown>, callback: grpc.sendUnaryData<unknown>) =>
    callback(null, { messageIds: call.request.messages.map(() => String(++published)) }),
});
const port = await new Promise<number>((resolve, reject) =>
  server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, bound) => (e ? reject(e) : resolve(bound))),
);
await reply(port);
