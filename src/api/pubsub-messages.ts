/**
 * The google.pubsub.v1 and google.iam.v1 messages the handlers read, as both transports decode them
 * (MESSAGE_SHAPE: proto-loader for gRPC, fromProtoJson for REST): camelCase fields, int64 as strings,
 * enums by name, bytes as Buffers, every scalar, list and map present at its default, an unset message
 * field `null`, an unset oneof member absent. Only the fields Orderly reads are listed; the rest are still
 * there (each message is a ProtoObject), which is how refuseUnsupported finds the fields it refuses.
 */

/** A message as the handlers see it: the fields of its proto type, shaped as MESSAGE_SHAPE says. */
export type ProtoObject = Record<string, unknown>;

/** google.protobuf.Duration and Timestamp. */
export interface ProtoDuration {
  seconds?: string | number;
  nanos?: number;
}

export interface ProtoFieldMask extends ProtoObject {
  paths: string[];
}

/** The paging fields of every List request. */
export interface ProtoPageRequest extends ProtoObject {
  pageSize: number;
  pageToken: string;
}

export interface ProtoTopic extends ProtoObject {
  name: string;
  labels: Record<string, string>;
  messageRetentionDuration: ProtoDuration | null;
  /** Checked by the schema registry (SchemaRegistry.checkTopicSettings). */
  schemaSettings: ProtoObject | null;
}

export interface ProtoPushConfig extends ProtoObject {
  pushEndpoint: string;
  attributes: Record<string, string>;
  oidcToken?: { serviceAccountEmail: string; audience: string } | null;
  noWrapper?: { writeMetadata: boolean } | null;
}

export interface ProtoBigQueryConfig extends ProtoObject {
  table: string;
  useTopicSchema: boolean;
  useTableSchema: boolean;
  writeMetadata: boolean;
  dropUnknownFields: boolean;
  serviceAccountEmail: string;
}

export interface ProtoCloudStorageConfig extends ProtoObject {
  bucket: string;
  filenamePrefix: string;
  filenameSuffix: string;
  filenameDatetimeFormat: string;
  textConfig?: ProtoObject | null;
  avroConfig?: { writeMetadata: boolean; useTopicSchema: boolean } | null;
  maxDuration: ProtoDuration | null;
  maxBytes: string;
  maxMessages: string;
  serviceAccountEmail: string;
  /** Orderly's own (JSON_EXTENSIONS), plain JSON checked by the connector. */
  parquetConfig?: unknown;
  shards?: unknown;
}

export interface ProtoSubscription extends ProtoObject {
  name: string;
  topic: string;
  pushConfig: ProtoPushConfig | null;
  bigqueryConfig: ProtoBigQueryConfig | null;
  cloudStorageConfig: ProtoCloudStorageConfig | null;
  ackDeadlineSeconds: number;
  retainAckedMessages: boolean;
  messageRetentionDuration: ProtoDuration | null;
  labels: Record<string, string>;
  enableMessageOrdering: boolean;
  expirationPolicy: { ttl: ProtoDuration | null } | null;
  filter: string;
  deadLetterPolicy: { deadLetterTopic: string; maxDeliveryAttempts: number } | null;
  retryPolicy: { minimumBackoff: ProtoDuration | null; maximumBackoff: ProtoDuration | null } | null;
  detached: boolean;
  enableExactlyOnceDelivery: boolean;
  /** Orderly's own (JSON_EXTENSIONS): a third-party export connector, checked by the core (normalizeSubscription). */
  exportConfig?: unknown;
}

export interface ProtoPubsubMessage extends ProtoObject {
  data: Uint8Array;
  attributes: Record<string, string>;
  orderingKey: string;
}

export interface ProtoSnapshot extends ProtoObject {
  name: string;
  expireTime: ProtoDuration | null;
  labels: Record<string, string>;
}

export interface ProtoPolicy extends ProtoObject {
  version: number;
  bindings: { role: string; members: string[]; condition: ProtoObject | null }[];
  auditConfigs: ProtoObject[];
  etag: Uint8Array;
}

/** The request message of each method, by the name the proto gives the method. */
export interface PublisherRequests {
  CreateTopic: ProtoTopic;
  UpdateTopic: { topic: ProtoTopic | null; updateMask: ProtoFieldMask | null };
  Publish: { topic: string; messages: ProtoPubsubMessage[] };
  GetTopic: { topic: string };
  ListTopics: ProtoPageRequest & { project: string };
  ListTopicSubscriptions: ProtoPageRequest & { topic: string };
  ListTopicSnapshots: ProtoPageRequest & { topic: string };
  DeleteTopic: { topic: string };
  DetachSubscription: { subscription: string };
}

export interface SubscriberRequests {
  CreateSubscription: ProtoSubscription;
  GetSubscription: { subscription: string };
  UpdateSubscription: { subscription: ProtoSubscription | null; updateMask: ProtoFieldMask | null };
  ListSubscriptions: ProtoPageRequest & { project: string };
  DeleteSubscription: { subscription: string };
  ModifyAckDeadline: { subscription: string; ackIds: string[]; ackDeadlineSeconds: number };
  Acknowledge: { subscription: string; ackIds: string[] };
  Pull: { subscription: string; returnImmediately: boolean; maxMessages: number };
  ModifyPushConfig: { subscription: string; pushConfig: ProtoPushConfig | null };
  GetSnapshot: { snapshot: string };
  ListSnapshots: ProtoPageRequest & { project: string };
  CreateSnapshot: { name: string; subscription: string; labels: Record<string, string>; tags: Record<string, string> };
  UpdateSnapshot: { snapshot: ProtoSnapshot | null; updateMask: ProtoFieldMask | null };
  DeleteSnapshot: { snapshot: string };
  /** `target` is a oneof: exactly one of time and snapshot is present. */
  Seek: { subscription: string; time?: ProtoDuration | null; snapshot?: string };
}

/** Schemas and views are checked by the schema registry, which takes them as they come. */
export interface SchemaServiceRequests {
  CreateSchema: { parent: string; schema: ProtoObject | null; schemaId: string };
  GetSchema: { name: string; view: string };
  ListSchemas: ProtoPageRequest & { parent: string; view: string };
  ListSchemaRevisions: ProtoPageRequest & { name: string; view: string };
  CommitSchema: { name: string; schema: ProtoObject | null };
  RollbackSchema: { name: string; revisionId: string };
  DeleteSchemaRevision: { name: string; revisionId: string };
  DeleteSchema: { name: string };
  ValidateSchema: { parent: string; schema: ProtoObject | null };
  /** `schema_spec` is a oneof: name or schema. */
  ValidateMessage: { parent: string; name?: string; schema?: ProtoObject | null; message: Uint8Array; encoding: string };
}

export interface IamPolicyRequests {
  SetIamPolicy: { resource: string; policy: ProtoPolicy | null; updateMask: ProtoFieldMask | null };
  GetIamPolicy: { resource: string; options: { requestedPolicyVersion: number } | null };
  TestIamPermissions: { resource: string; permissions: string[] };
}
