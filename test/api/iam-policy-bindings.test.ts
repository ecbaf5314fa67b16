import { PubSub } from '@google-cloud/pubsub';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { servePerFile } from '../helpers/serve-process.js';

/**
 * SetIamPolicy keeps a policy's bindings as IAM keeps them: one that names no member grants nothing and
 * is not kept (Terraform's authoritative bindings with `members = []` rely on it), over Google's client
 * and REST alike.
 */
const { server } = servePerFile();
let pubsub: PubSub;

beforeAll(() => {
  pubsub = new PubSub({ projectId: 'iam-bindings', apiEndpoint: server.host, emulatorMode: true });
});

afterAll(async () => {
  await pubsub?.close();
});

describe('IAM policy bindings', () => {
  it('a binding without members is not kept: neither in the answer to SetIamPolicy nor in GetIamPolicy', async () => {
    const [topic] = await pubsub.createTopic('guarded');
    const bindings = [
      { role: 'roles/pubsub.viewer', members: [] },
      { role: 'roles/pubsub.publisher', members: ['user:ada@example.com'] },
    ];
    const [set] = await topic.iam.setPolicy({ bindings });
    expect(set.bindings).toEqual([expect.objectContaining({ role: 'roles/pubsub.publisher', members: ['user:ada@example.com'] })]);
    const [read] = await topic.iam.getPolicy();
    expect(read.bindings).toEqual(set.bindings);
    // Over REST the same: only the binding with a member comes back.
    const res = await fetch(`http://${server.host}/v1/projects/iam-bindings/topics/guarded:setIamPolicy`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ policy: { bindings: [{ role: 'roles/pubsub.subscriber' }, ...bindings] } }),
    });
    expect((await res.json()).bindings).toEqual([{ role: 'roles/pubsub.publisher', members: ['user:ada@example.com'] }]);
  });

  it('a binding without members is still checked: a malformed role is refused, not dropped unseen', async () => {
    const [topic] = await pubsub.createTopic('checked');
    await expect(topic.iam.setPolicy({ bindings: [{ role: 'viewer', members: [] }] })).rejects.toMatchObject({
      code: 3,
      details: 'policy.bindings[0].role: must be a role like "roles/pubsub.subscriber", got "viewer"',
    });
  });
});
