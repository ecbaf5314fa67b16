import * as grpc from '@grpc/grpc-js';
import { v1 } from '@google-cloud/pubsub';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { servePerFile } from '../helpers/serve-process.js';

/**
 * GetIamPolicy's options.requestedPolicyVersion (google.iam.v1.GetPolicyOptions): "Valid values are 0, 1,
 * and 3. Requests specifying an invalid value will be rejected. Requests for policies with any
 * conditional role bindings must specify version 3." Over Google's generated client and REST alike.
 */
const { server, api } = servePerFile();
const TOPIC = 'projects/iam-versions/topics/guarded';
const CONDITIONAL = {
  version: 3,
  bindings: [
    {
      role: 'roles/pubsub.publisher',
      members: ['user:ada@example.com'],
      condition: { expression: 'request.time < timestamp("2030-01-01T00:00:00Z")', title: 'until 2030' },
    },
  ],
};
let publisher: v1.PublisherClient;

/** Google's generated client's IAM calls, whose typings take protobufjs message instances rather than plain requests. */
type GetIamPolicyRequest = Parameters<v1.PublisherClient['getIamPolicy']>[0];
type SetIamPolicyRequest = Parameters<v1.PublisherClient['setIamPolicy']>[0];
const getPolicy = (request: object) => publisher.getIamPolicy(request as GetIamPolicyRequest);
const setPolicy = (request: object) => publisher.setIamPolicy(request as SetIamPolicyRequest);

beforeAll(async () => {
  publisher = new v1.PublisherClient({ servicePath: '127.0.0.1', port: server.port, sslCreds: grpc.credentials.createInsecure() });
  await publisher.createTopic({ name: TOPIC });
});

afterAll(async () => {
  await publisher?.close();
});

async function restGetPolicy(version: string): Promise<{ status: number; json: any }> {
  const res = await fetch(`http://${server.host}/v1/${TOPIC}:getIamPolicy?options.requestedPolicyVersion=${version}`);
  return { status: res.status, json: await res.json() };
}

describe('GetIamPolicy honours options.requestedPolicyVersion', () => {
  it('a version other than 0, 1 or 3 is INVALID_ARGUMENT naming the field', async () => {
    for (const version of [2, 4, -1]) {
      await expect(getPolicy({ resource: TOPIC, options: { requestedPolicyVersion: version } })).rejects.toMatchObject({
        code: grpc.status.INVALID_ARGUMENT,
        details: `options.requestedPolicyVersion: must be 0, 1 or 3, got ${version}`,
      });
    }
    expect(await restGetPolicy('7')).toMatchObject({
      status: 400,
      json: { error: { status: 'INVALID_ARGUMENT', message: 'options.requestedPolicyVersion: must be 0, 1 or 3, got 7' } },
    });
  });

  it('below version 3 a conditional binding is shown as IAM shows it (role_withcond_hash, no condition), and cannot be set back so', async () => {
    await setPolicy({ resource: TOPIC, policy: CONDITIONAL });
    const [read] = await getPolicy({ resource: TOPIC, options: { requestedPolicyVersion: 3 } });
    expect(read).toMatchObject({
      version: 3,
      bindings: [expect.objectContaining({ condition: expect.objectContaining({ title: 'until 2030' }) })],
    });
    // Google's handwritten client asks with no version: it must not read the conditional grant as an unconditional one.
    const withcond = { role: expect.stringMatching(/^roles\/pubsub\.publisher_withcond_[0-9a-f]{20}$/), members: ['user:ada@example.com'] };
    for (const options of [undefined, { requestedPolicyVersion: 1 }]) {
      const [v1Policy] = await getPolicy({ resource: TOPIC, options });
      expect(v1Policy).toMatchObject({ version: 1, bindings: [{ ...withcond, condition: null }] });
    }
    const rest = await restGetPolicy('1');
    expect(rest).toMatchObject({ status: 200, json: { version: 1, bindings: [withcond] } });
    expect(rest.json.bindings[0].condition).toBeUndefined();
    // Set back, the version 1 view would replace the condition by a grant of a role that does not exist: refused,
    // and with the etag (IAM's guard), any change of the bindings that is not version 3 is refused.
    await expect(setPolicy({ resource: TOPIC, policy: { bindings: rest.json.bindings } })).rejects.toMatchObject({
      code: grpc.status.INVALID_ARGUMENT,
      details: expect.stringMatching(
        /^policy\.bindings\[0\]\.role: "roles\/pubsub\.publisher_withcond_[0-9a-f]{20}" is the version 1 view/,
      ),
    });
    await expect(
      setPolicy({
        resource: TOPIC,
        policy: {
          etag: Buffer.from(rest.json.etag, 'base64'),
          bindings: [{ role: 'roles/pubsub.viewer', members: ['user:ada@example.com'] }],
        },
      }),
    ).rejects.toMatchObject({
      code: grpc.status.INVALID_ARGUMENT,
      details: `policy.version: the policy of ${TOPIC} has conditional bindings: changing its bindings takes version 3, got version 0`,
    });
    // Without conditions, any valid version reads it as it is.
    await setPolicy({ resource: TOPIC, policy: { bindings: [{ role: 'roles/pubsub.viewer', members: ['user:ada@example.com'] }] } });
    for (const requestedPolicyVersion of [0, 1, 3]) {
      const [policy] = await getPolicy({ resource: TOPIC, options: { requestedPolicyVersion } });
      expect(policy.bindings).toEqual([expect.objectContaining({ role: 'roles/pubsub.viewer', condition: null })]);
    }
  });

  it('SetIamPolicy checks the policy its update mask makes: no version 1 policy with conditional bindings', async () => {
    await setPolicy({ resource: TOPIC, policy: CONDITIONAL });
    // Google's generated client drops SetIamPolicyRequest.update_mask (google-gax's IAM protos lack it): raw stubs and REST send it.
    await expect(
      api.policy('setIamPolicy', { resource: TOPIC, policy: { version: 1 }, updateMask: { paths: ['version'] } }),
    ).rejects.toMatchObject({
      code: grpc.status.INVALID_ARGUMENT,
      details: 'policy.version: a policy with conditional bindings must be version 3, got version 1',
    });
    const [kept] = await getPolicy({ resource: TOPIC, options: { requestedPolicyVersion: 3 } });
    expect(kept).toMatchObject({ version: 3, bindings: [expect.objectContaining({ condition: expect.anything() })] });
    // Bindings the mask leaves out are neither applied nor judged.
    const auditConfigs = [{ service: 'allServices', auditLogConfigs: [{ logType: 'DATA_READ' }] }];
    const ignored = { bindings: [{ ...CONDITIONAL.bindings[0], role: 'not-a-role' }], auditConfigs };
    await api.policy('setIamPolicy', { resource: TOPIC, policy: { ...ignored, version: 3 }, updateMask: { paths: ['audit_configs'] } });
    const res = await fetch(`http://${server.host}/v1/${TOPIC}:setIamPolicy`, {
      method: 'POST',
      body: JSON.stringify({ policy: { bindings: ignored.bindings, auditConfigs }, updateMask: 'auditConfigs' }),
    });
    expect(res.status).toBe(200);
    const after = await api.policy('getIamPolicy', { resource: TOPIC, options: { requestedPolicyVersion: 3 } });
    expect(after).toMatchObject({
      version: 3,
      bindings: kept.bindings,
      auditConfigs: [expect.objectContaining({ service: 'allServices' })],
    });
  });
});
