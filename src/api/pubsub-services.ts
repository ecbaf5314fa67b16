import type { PubSubCore } from '../core/pubsub-core.js';
import { iamHandlers } from './iam-service.js';
import { publisherHandlers } from './publisher-service.js';
import type { ServiceHandlers } from './rpc.js';
import { schemaHandlers } from './schema-service.js';
import { subscriberHandlers } from './subscriber-service.js';

/**
 * Every unary RPC Orderly serves, by service and method; gRPC (grpc-server.ts) and REST (rest-handler.ts)
 * both call these. A method a service defines but this leaves out answers UNIMPLEMENTED on both.
 */
export function pubsubHandlers(core: PubSubCore): ServiceHandlers {
  return {
    'google.pubsub.v1.Publisher': publisherHandlers(core),
    'google.pubsub.v1.Subscriber': subscriberHandlers(core),
    'google.pubsub.v1.SchemaService': schemaHandlers(core),
    'google.iam.v1.IAMPolicy': iamHandlers(core),
  };
}
