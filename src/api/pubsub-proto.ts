import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import protobuf from 'protobufjs';

/**
 * Google's protos, loaded from the copies shipped in @google-cloud/pubsub and google-gax (not copied
 * here): google.pubsub.v1 (Publisher, Subscriber, SchemaService) and google.iam.v1 (IAMPolicy, which
 * Google's clients call on the same endpoint for topics, subscriptions, snapshots and schemas).
 */
const FILES = ['google/pubsub/v1/pubsub.proto', 'google/pubsub/v1/schema.proto', 'google/iam/v1/iam_policy.proto'];

/**
 * How gRPC requests and responses look in JavaScript (proto-loader's options): camelCase fields, int64
 * as strings, enums by name, every field present (defaults filled), oneofs named. REST requests are
 * decoded into the same shape (proto-json.ts), so both transports reach the same handlers.
 */
export const MESSAGE_SHAPE = { longs: String, enums: String, defaults: true, oneofs: true } as const;

let includeDirs: string[] | undefined;

function protoDirs(): string[] {
  if (includeDirs) return includeDirs;
  const require = createRequire(import.meta.url);
  const pubsubPackage = require.resolve('@google-cloud/pubsub/package.json');
  // google/api/*.proto (annotations, field behaviour) and google/iam ship in google-gax, a dependency of the client.
  const gaxMain = createRequire(pubsubPackage).resolve('google-gax');
  const gaxPackage = join(
    gaxMain.slice(0, gaxMain.lastIndexOf('/node_modules/google-gax/') + '/node_modules/google-gax/'.length),
    'package.json',
  );
  includeDirs = [join(dirname(pubsubPackage), 'build', 'protos'), join(dirname(gaxPackage), 'build', 'protos')];
  return includeDirs;
}

/** The services for grpc-js. */
export function loadPubsubProto(): grpc.GrpcObject {
  const definition = protoLoader.loadSync(FILES, { includeDirs: protoDirs(), keepCase: false, ...MESSAGE_SHAPE });
  return grpc.loadPackageDefinition(definition);
}

let root: protobuf.Root | undefined;

/** The same protos as protobufjs descriptors (field types, options such as google.api.http), loaded once. */
export function pubsubRoot(): protobuf.Root {
  if (root) return root;
  const loaded = new protobuf.Root();
  loaded.resolvePath = (_origin, target) =>
    protoDirs()
      .map((d) => join(d, target))
      .find((p) => existsSync(p)) ?? target;
  loaded.loadSync(FILES, { keepCase: false });
  loaded.resolveAll();
  root = loaded;
  return root;
}

/** The directory holding google/pubsub/v1/*.proto (the API coverage test reads them). */
export function pubsubProtoDir(): string {
  return protoDirs()[0]!;
}
