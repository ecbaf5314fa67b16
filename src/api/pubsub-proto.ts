import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/**
 * Google's pubsub.proto, loaded from the protos shipped in @google-cloud/pubsub (not copied here):
 * int64 as strings, enums as names, defaults filled in.
 */
export function loadPubsubProto(): grpc.GrpcObject {
  const require = createRequire(import.meta.url);
  const pubsubPackage = require.resolve('@google-cloud/pubsub/package.json');
  // google/api/*.proto (annotations, field behaviour) ship in google-gax, a dependency of the client.
  const gaxMain = createRequire(pubsubPackage).resolve('google-gax');
  const gaxPackage = join(gaxMain.slice(0, gaxMain.lastIndexOf('/node_modules/google-gax/') + '/node_modules/google-gax/'.length), 'package.json');
  const definition = protoLoader.loadSync('google/pubsub/v1/pubsub.proto', {
    includeDirs: [join(dirname(pubsubPackage), 'build', 'protos'), join(dirname(gaxPackage), 'build', 'protos')],
    keepCase: false,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  return grpc.loadPackageDefinition(definition);
}
