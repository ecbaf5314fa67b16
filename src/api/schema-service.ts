import type { PubSubCore } from '../core/pubsub-core.js';
import { schemaToProto } from './proto-mapping.js';
import type { SchemaServiceRequests } from './pubsub-messages.js';
import { serviceHandlers, type RpcHandler } from './rpc.js';

/**
 * google.pubsub.v1.SchemaService over the core's schema registry (src/schema/schema-registry.ts holds
 * the rules: definitions, revisions, compatibility, views, paging). Deleting a schema points its topics
 * at `_deleted-schema_` (the core does that as the deletion is stored).
 */
export function schemaHandlers(core: PubSubCore): Record<string, RpcHandler> {
  const schemas = () => core.schemas;
  return serviceHandlers<SchemaServiceRequests>({
    CreateSchema: async (r) => schemaToProto(await schemas().create({ parent: r.parent, schemaId: r.schemaId, schema: r.schema })),
    GetSchema: async (r) => schemaToProto(schemas().get(r.name, r.view)),
    ListSchemas: async (r) => {
      const { schemas: list, nextPageToken } = schemas().list({
        parent: r.parent,
        view: r.view,
        pageSize: r.pageSize,
        pageToken: r.pageToken,
      });
      return { schemas: list.map(schemaToProto), nextPageToken };
    },
    ListSchemaRevisions: async (r) => {
      const { schemas: list, nextPageToken } = schemas().listRevisions({
        name: r.name,
        view: r.view,
        pageSize: r.pageSize,
        pageToken: r.pageToken,
      });
      return { schemas: list.map(schemaToProto), nextPageToken };
    },
    CommitSchema: async (r) => schemaToProto(await schemas().commit({ name: r.name, schema: r.schema })),
    RollbackSchema: async (r) => schemaToProto(await schemas().rollback({ name: r.name, revisionId: r.revisionId })),
    DeleteSchemaRevision: async (r) => schemaToProto(await schemas().deleteRevision({ name: r.name, revisionId: r.revisionId })),
    DeleteSchema: async (r) => {
      await schemas().delete(r.name);
    },
    ValidateSchema: async (r) => {
      schemas().validateSchema({ parent: r.parent, schema: r.schema });
      return {};
    },
    ValidateMessage: async (r) => {
      schemas().validateMessage({
        parent: r.parent,
        name: r.name || undefined,
        schema: r.schema ?? undefined,
        message: r.message,
        encoding: r.encoding,
      });
      return {};
    },
  });
}
