import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { servePerFile } from '../helpers/serve-process.js';

/**
 * The IAM methods name their resource in `resource` (google.iam.v1): a malformed topic, subscription,
 * snapshot or schema name there is INVALID_ARGUMENT naming `resource`, whatever the kind, and a
 * well-formed one that does not exist is NOT_FOUND naming it, except in TestIamPermissions, which answers
 * it with no permissions, as Pub/Sub documents.
 */
const { server, api } = servePerFile();
const P = 'projects/iam-names';

describe('IAM resource names', () => {
  it('a malformed name is INVALID_ARGUMENT naming resource, for every kind and method, over gRPC and REST', async () => {
    for (const kind of ['topics', 'subscriptions', 'snapshots', 'schemas'])
      for (const id of ['ab', 'goog-policy', '9lives']) {
        const resource = `${P}/${kind}/${id}`;
        const expected = expect.stringMatching(new RegExp(`^resource: invalid (schema )?id "${id}"`));
        for (const [method, request] of [
          ['getIamPolicy', { resource }],
          ['setIamPolicy', { resource, policy: { bindings: [] } }],
          ['testIamPermissions', { resource, permissions: ['pubsub.topics.get'] }],
        ] as const)
          await expect(api.policy(method, request)).rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT, details: expected });
        const res = await fetch(`http://${server.host}/v1/${resource}:getIamPolicy`);
        expect(res.status).toBe(400);
        expect((await res.json()).error.message).toEqual(expected);
      }
  });

  it('a well-formed name of nothing is NOT_FOUND naming it (Get/SetIamPolicy)', async () => {
    for (const [kind, label] of [
      ['topics', 'Topic'],
      ['subscriptions', 'Subscription'],
      ['snapshots', 'Snapshot'],
      ['schemas', 'Schema'],
    ])
      await expect(api.policy('getIamPolicy', { resource: `${P}/${kind}/missing` })).rejects.toMatchObject({
        code: grpc.status.NOT_FOUND,
        details: `${label} not found: ${P}/${kind}/missing`,
      });
  });

  it('TestIamPermissions on a well-formed name of nothing grants no permission, over gRPC and REST', async () => {
    for (const kind of ['topics', 'subscriptions', 'snapshots', 'schemas']) {
      const resource = `${P}/${kind}/missing`;
      const permissions = ['pubsub.topics.get', 'pubsub.subscriptions.consume'];
      expect((await api.policy('testIamPermissions', { resource, permissions })).permissions).toEqual([]);
      const res = await fetch(`http://${server.host}/v1/${resource}:testIamPermissions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ permissions }),
      });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({});
    }
    // What it asks is still checked: a wildcard is refused whether or not the resource exists.
    await expect(api.policy('testIamPermissions', { resource: `${P}/topics/missing`, permissions: ['pubsub.*'] })).rejects.toMatchObject({
      code: grpc.status.INVALID_ARGUMENT,
      details: 'permissions[0]: wildcards are not allowed, got "pubsub.*"',
    });
  });
});
