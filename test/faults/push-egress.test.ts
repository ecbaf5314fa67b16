import { lookup as dnsLookup } from 'node:dns';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { PubSubCore } from '../../src/core/pubsub-core.js';
import { isLinkLocal, type PushEgress } from '../../src/core/push-egress.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait-for.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

/** A core on real time (push requests are real HTTP) with a dead-letter topic that keeps why deliveries failed. */
async function pushCore(push?: PushEgress) {
  const dir = tempDir();
  const core = await PubSubCore.open({ store: SqliteStore.open(dir.path, { durability: 'process' }), projectId: 'p', tickMs: 20, push });
  cleanups.push(
    () => dir.remove(),
    () => core.close(),
  );
  await core.createTopic('events');
  await core.createTopic('dead');
  await core.createSubscription('dead-sub', { topic: 'dead' });
  /** Subscribes `endpoint`, publishes one message, and resolves with the dead-lettered failure message. */
  const failureOf = async (endpoint: string): Promise<string> => {
    await core.createSubscription('pushed', {
      topic: 'events',
      pushConfig: { pushEndpoint: endpoint },
      retryPolicy: { minimumBackoff: 0, maximumBackoff: 0 },
      deadLetterPolicy: { deadLetterTopic: 'dead', maxDeliveryAttempts: 5 },
    });
    await core.publish('events', [{ data: 'secret order' }]);
    let dead: Awaited<ReturnType<typeof core.pull>> = [];
    await waitFor('the message on the dead-letter topic', async () => (dead = await core.pull('dead-sub', { maxMessages: 1 })).length > 0);
    return dead[0]!.message.attributes.CloudPubSubDeadLetterSourceDeliveryErrorMessage!;
  };
  return { core, failureOf };
}

/** A real HTTP server on 127.0.0.1 counting the requests it got. */
async function httpServer(answer: (res: import('node:http').ServerResponse) => void): Promise<{ url: string; requests: () => number }> {
  let requests = 0;
  const server: Server = createServer((req, res) => {
    requests++;
    req.resume();
    req.on('end', () => answer(res));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanups.push(() => new Promise<void>((r) => server.close(() => r())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests: () => requests };
}

describe('push egress (issue #9.6)', () => {
  it('a redirect is a failed delivery (nack): the redirect target never receives the message', async () => {
    const target = await httpServer((res) => res.writeHead(204).end());
    const redirecting = await httpServer((res) => res.writeHead(307, { location: `${target.url}/stolen` }).end());
    const { failureOf } = await pushCore();
    const failure = await failureOf(`${redirecting.url}/push`);
    expect(failure).toBe('push endpoint answered HTTP 307; redirects are not followed');
    expect(redirecting.requests()).toBe(5);
    expect(target.requests()).toBe(0);
  });

  it.each([
    ['the metadata address', 'http://169.254.169.254/computeMetadata/v1/'],
    ['another link-local address with a port', 'http://169.254.10.20:8080/push'],
    ['an IPv4-mapped IPv6 form', 'http://[::ffff:169.254.169.254]/'],
    ['the AWS IPv6 metadata address', 'http://[fd00:ec2::254]/latest/'],
    ['an IPv6 link-local address', 'http://[fe80::1]/'],
  ])('%s is refused without being contacted', async (_what, endpoint) => {
    const { failureOf } = await pushCore();
    const failure = await failureOf(endpoint);
    expect(failure).toMatch(/^push endpoint address .* is link-local or a cloud metadata address; refused \(set push.allowLinkLocal/);
  });

  it('a name is checked on the address it resolves to when connecting (DNS rebinding), not on its text', async () => {
    const endpoint = await httpServer((res) => res.writeHead(204).end());
    const port = new URL(endpoint.url).port;
    let resolutions = 0;
    // Stands in for a DNS server that answers a harmless-looking name with the metadata address.
    const lookup = ((hostname: string, options: object, callback: (...args: unknown[]) => void) => {
      resolutions++;
      if (hostname === 'innocent.test') return callback(null, [{ address: '169.254.169.254', family: 4 }]);
      return dnsLookup(hostname, options, callback as never);
    }) as unknown as typeof dnsLookup;
    const { failureOf } = await pushCore({ allowLinkLocal: false, lookup });
    const failure = await failureOf(`http://innocent.test:${port}/push`);
    expect(failure).toContain('push endpoint address 169.254.169.254 is link-local');
    expect(resolutions).toBeGreaterThanOrEqual(5);
    expect(endpoint.requests()).toBe(0);
  });

  it('link-local and metadata addresses in every notation; ordinary ones pass', () => {
    for (const a of [
      '169.254.169.254',
      '169.254.0.1',
      '::ffff:169.254.169.254',
      '::ffff:a9fe:a9fe',
      'fd00:ec2::254',
      'fe80::1',
      'febf::1',
      '64:ff9b::a9fe:a9fe',
    ]) {
      expect(isLinkLocal(a), a).toBe(true);
    }
    for (const a of [
      '127.0.0.1',
      '10.0.0.1',
      '169.253.255.255',
      '169.255.0.0',
      '::1',
      'fd00:ec2::253',
      '::ffff:127.0.0.1',
      'localhost',
      'example.com',
    ]) {
      expect(isLinkLocal(a), a).toBe(false);
    }
  });

  it('pushConfig.attributes may not set hop-by-hop, framing or auth headers: refused at create and update, naming the attribute', async () => {
    const { core } = await pushCore();
    const create = (attributes: Record<string, string>) =>
      core.createSubscription('pushed-attrs', { topic: 'events', pushConfig: { pushEndpoint: 'http://127.0.0.1:9/push', attributes } });
    for (const header of [
      'Authorization',
      'proxy-authorization',
      'Cookie',
      'Host',
      'Connection',
      'Keep-Alive',
      'Transfer-Encoding',
      'TE',
      'Trailer',
      'Upgrade',
      'Content-Length',
      'Content-Type',
    ]) {
      await expect(create({ [header]: 'x' }), header).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
        field: `pushConfig.attributes["${header}"]`,
      });
    }
    await expect(create({ 'bad header': 'x' })).rejects.toThrow('is not a valid HTTP header name');
    await expect(create({ 'x-tenant': 'a\r\nHost: evil' })).rejects.toThrow('must not contain control characters');
    // Pub/Sub's one push attribute picks the body's format: Orderly sends v1's (v1beta2 names it too), and
    // took v1beta1, or any value, then pushed v1's shape to an endpoint that asked for another.
    for (const version of ['v1beta1', 'v2', 'V1']) {
      await expect(create({ 'X-Goog-Version': version }), version).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
        field: 'pushConfig.attributes["X-Goog-Version"]',
        message: expect.stringContaining(`must be v1 or v1beta2 (the push format Orderly sends), got "${version}"`),
      });
    }
    await create({ 'x-goog-version': 'v1beta2' });
    await core.deleteSubscription('pushed-attrs');
    await create({ 'x-goog-version': 'v1', 'x-tenant': 'acme' });
    await expect(
      core.updateSubscription('pushed-attrs', {
        pushConfig: { pushEndpoint: 'http://127.0.0.1:9/push', attributes: { authorization: 'Bearer stolen' } },
      }),
    ).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      field: 'pushConfig.attributes["authorization"]',
    });
    expect(core.getSubscription('pushed-attrs').pushConfig?.attributes).toEqual({ 'x-goog-version': 'v1', 'x-tenant': 'acme' });
  });

  it('the allowed attributes arrive as headers', async () => {
    const seen: Record<string, string | string[] | undefined>[] = [];
    const server: Server = createServer((req, res) => {
      seen.push(req.headers);
      req.resume();
      req.on('end', () => res.writeHead(204).end());
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanups.push(() => new Promise<void>((r) => server.close(() => r())));
    const { core } = await pushCore();
    await core.createSubscription('pushed-headers', {
      topic: 'events',
      pushConfig: { pushEndpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, attributes: { 'x-tenant': 'acme' } },
    });
    await core.publish('events', [{ data: 'x' }]);
    await waitFor('the push', () => seen.length > 0 && core.metrics('pushed-headers').backlogMessages === 0);
    expect(seen[0]).toMatchObject({ 'x-tenant': 'acme', 'content-type': 'application/json' });
  });
});
