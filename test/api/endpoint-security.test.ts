import * as grpc from '@grpc/grpc-js';
import { PubSub } from '@google-cloud/pubsub';
import { execFile, spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OrderlyRunProcess } from '../faults/orderly-run-process.js';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait-for.js';
import { rawPubsubClients, startServe, type ServeProcess } from '../helpers/serve-process.js';

const bin = fileURLToPath(new URL('../../bin/orderly.js', import.meta.url));
const TOKEN = 'test-token-0123456789abcdef';

/** Runs the CLI to its end (for the commands that must refuse to start). */
function orderly(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    const child = execFile(process.execPath, [bin, ...args], { env: { ...process.env, ...env }, timeout: 30_000 }, (_e, stdout, stderr) =>
      resolve({ code: child.exitCode ?? -1, out: stdout + stderr }),
    );
  });
}

describe('the endpoint off loopback needs an opt-in and a token (issue #9.6)', () => {
  it('serve --host 0.0.0.0 refuses to start without --allow-remote and a token (exit 2)', async () => {
    const dir = tempDir();
    try {
      const bare = await orderly(['serve', '--host', '0.0.0.0', '--port', '0', '--data-dir', dir.path]);
      expect(bare.code).toBe(2);
      expect(bare.out).toContain('refusing to serve on 0.0.0.0');
      expect(bare.out).toContain('--allow-remote');
      const noToken = await orderly(['serve', '--host', '0.0.0.0', '--allow-remote', '--port', '0', '--data-dir', dir.path], {
        ORDERLY_TOKEN: '',
      });
      expect(noToken.code).toBe(2);
      // An empty ORDERLY_TOKEN is no token (not a too short one): the refusal says what is missing.
      expect(noToken.out).toContain('that needs both --allow-remote and a token');
      expect(noToken.out).not.toContain('at least 16 characters');
      const shortToken = await orderly(['serve', '--auth-token', 'short', '--port', '0', '--data-dir', dir.path]);
      expect(shortToken.code).toBe(2);
      expect(shortToken.out).toContain('at least 16 characters');
      // No header can carry a token with a space: it was taken, and every call was then 401, the right token too.
      const spaced = await orderly(['serve', '--port', '0', '--data-dir', dir.path], { ORDERLY_TOKEN: 'correct horse battery staple' });
      expect(spaced.code).toBe(2);
      expect(spaced.out).toContain('ORDERLY_TOKEN: the token must be printable ASCII without spaces');
      expect(spaced.out).not.toContain('correct horse');
    } finally {
      dir.remove();
    }
  });

  it("serve --config binds the job's endpoint host and port unless a flag overrides them; a bad --port is a usage error", async () => {
    const dir = tempDir();
    const free = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, '127.0.0.1', () => {
        const { port } = probe.address() as AddressInfo;
        probe.close(() => resolve(port));
      });
    });
    const job = join(dir.path, 'job.yaml');
    writeFileSync(job, `dataDir: ./data\nendpoint: { host: 127.0.0.1, port: ${free} }\n`);
    const child = spawn(process.execPath, [bin, 'serve', '--config', job], { stdio: ['ignore', 'pipe', 'pipe'] });
    const exited = new Promise((resolve) => child.on('exit', resolve));
    try {
      let out = '';
      child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
      await waitFor('serve to listen', () => out.includes('Pub/Sub API'), 30_000);
      expect(out).toContain(`on 127.0.0.1:${free} (PUBSUB_EMULATOR_HOST=127.0.0.1:${free})`);
    } finally {
      child.kill('SIGTERM');
      await exited;
    }
    try {
      // '' and ' ' had been read as 0 (any free port), '0x1f90' as 8080.
      for (const port of ['abc', '70000', '', ' ', '0x1f90', '8e3']) {
        const bad = await orderly(['serve', '--config', job, '--port', port]);
        expect(bad.code).toBe(2);
        expect(bad.out).toContain(`--port: must be an integer from 0 to 65535, got ${port}`);
      }
    } finally {
      dir.remove();
    }
  });

  it('a job file with endpoint.host off loopback is invalid without allowRemote and authToken', async () => {
    const dir = tempDir();
    try {
      const job = join(dir.path, 'job.yaml');
      writeFileSync(job, 'endpoint:\n  host: 0.0.0.0\n  port: 0\n');
      const r = await orderly(['validate', job]);
      expect(r.code).toBe(2);
      expect(r.out).toContain('endpoint: refusing to serve on 0.0.0.0');
      expect(r.out).toContain('endpoint.allowRemote');
      writeFileSync(
        job,
        'endpoint:\n  host: 0.0.0.0\n  port: 0\n  allowRemote: true\n  authToken: ${ORDERLY_TOKEN}\npush:\n  allowLinkLocal: true\n',
      );
      expect((await orderly(['validate', job], { ORDERLY_TOKEN: TOKEN })).code).toBe(0);
      writeFileSync(job, 'push:\n  allowMetadata: true\n');
      expect((await orderly(['validate', job])).out).toContain('push.allowMetadata: unknown key');
    } finally {
      dir.remove();
    }
  });

  it('with --allow-remote and ORDERLY_TOKEN it serves on 0.0.0.0, warns, and lets only the token in', async () => {
    const server = await startServe(['--host', '0.0.0.0', '--allow-remote'], { ORDERLY_TOKEN: TOKEN });
    try {
      // The warning goes to stderr, the address line (which startServe waits for) to stdout: either pipe may be read first.
      await waitFor('the warning', () => server.output().includes('WARNING: 0.0.0.0 is reachable from other machines'));
      const url = `http://127.0.0.1:${server.port}/v1/projects/remote/topics/remote-topic`;
      expect((await fetch(url, { method: 'PUT', body: '{}' })).status).toBe(401);
      expect((await fetch(url, { method: 'PUT', body: '{}', headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(200);
      expect(server.output()).not.toContain(TOKEN);
      // 0.0.0.0 is where it listens, not an address to dial: clients on this machine are pointed at loopback.
      expect(server.output()).toContain(`on 0.0.0.0:${server.port} (PUBSUB_EMULATOR_HOST=127.0.0.1:${server.port})`);
    } finally {
      await server.stop();
    }
  });

  it('an empty ORDERLY_TOKEN counts as unset: serve on loopback starts without a token', async () => {
    const server = await startServe([], { ORDERLY_TOKEN: '' });
    try {
      const url = `http://127.0.0.1:${server.port}/v1/projects/local/topics/local-topic`;
      expect((await fetch(url, { method: 'PUT', body: '{}' })).status).toBe(200);
      expect(server.output()).not.toContain('every call needs');
    } finally {
      await server.stop();
    }
  });
});

describe('orderly run with a token in the job file (issue #9.6)', () => {
  it('serves the endpoint with the token, and orderly publish sends it', async () => {
    const dir = tempDir();
    const job = join(dir.path, 'job.yaml');
    writeFileSync(
      job,
      [
        'dataDir: ./data',
        'durability: process',
        'endpoint:',
        '  port: 0',
        '  authToken: ${ORDERLY_TOKEN}',
        'topics:',
        '  - name: run-topic',
        'subscriptions:',
        '  - name: run-sub',
        '    topic: run-topic',
        '',
      ].join('\n'),
    );
    writeFileSync(join(dir.path, 'lines.jsonl'), '{"n":1}\n{"n":2}\n');
    const child = spawn(process.execPath, [bin, 'run', job], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ORDERLY_TOKEN: TOKEN, ORDERLY_LOG_LEVEL: 'info' },
    });
    let out = '';
    child.stdout.on('data', (c) => (out += c));
    child.stderr.on('data', (c) => (out += c));
    try {
      const lock = join(dir.path, 'data', 'orderly.lock');
      await waitFor('the endpoint', () => existsSync(lock) && JSON.parse(readFileSync(lock, 'utf8')).endpoint !== undefined, 30_000);
      const endpoint = JSON.parse(readFileSync(lock, 'utf8')).endpoint as string;
      expect((await fetch(`http://${endpoint}/v1/projects/orderly-local/topics/run-topic`)).status).toBe(401);
      const published = await orderly(['publish', job, '--topic', 'run-topic', '--file', join(dir.path, 'lines.jsonl'), '--json'], {
        ORDERLY_TOKEN: TOKEN,
      });
      expect(JSON.parse(published.out)).toEqual({ published: 2, refused: [] });
      const pulled = await fetch(`http://${endpoint}/v1/projects/orderly-local/subscriptions/run-sub:pull`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}` },
        body: JSON.stringify({ returnImmediately: true, maxMessages: 10 }),
      });
      expect((await pulled.json()).receivedMessages).toHaveLength(2);
      expect(out).not.toContain(TOKEN);
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
      dir.remove();
    }
  });
});

describe('an endpoint on an IPv6 loopback address', () => {
  it('is written to the lock as [::1]:port, so orderly publish reaches it', async () => {
    // Before: the lock said ::1:port and orderly publish failed with "Invalid URL".
    const dir = tempDir();
    const job = join(dir.path, 'job.yaml');
    writeFileSync(
      job,
      'dataDir: ./data\ndurability: process\nendpoint: { host: "::1", port: 0 }\n' +
        'topics: [{ name: six-topic }]\nsubscriptions: [{ name: six-sub, topic: six-topic }]\n',
    );
    writeFileSync(join(dir.path, 'lines.jsonl'), '{"n":1}\n');
    const child = spawn(process.execPath, [bin, 'run', job], { stdio: 'ignore' });
    try {
      const lock = join(dir.path, 'data', 'orderly.lock');
      await waitFor(
        'the endpoint',
        () => {
          if (child.exitCode !== null) throw new Error(`orderly run exited ${child.exitCode}`);
          return existsSync(lock) && JSON.parse(readFileSync(lock, 'utf8')).endpoint !== undefined;
        },
        30_000,
      );
      expect(JSON.parse(readFileSync(lock, 'utf8')).endpoint).toMatch(/^\[::1\]:\d+$/);
      const published = await orderly(['publish', job, '--topic', 'six-topic', '--file', join(dir.path, 'lines.jsonl'), '--json']);
      expect(JSON.parse(published.out)).toEqual({ published: 1, refused: [] });
    } finally {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await new Promise((r) => child.once('exit', r));
      }
      dir.remove();
    }
  });
});

describe('the metrics server (/metrics, /status) is held to the same terms as the endpoint', () => {
  it('metrics.host off loopback is invalid without metrics.allowRemote and metrics.authToken', async () => {
    const dir = tempDir();
    try {
      const job = join(dir.path, 'job.yaml');
      // Before: accepted, and /status (every subscription, its hot ordering keys) was open to the network.
      writeFileSync(job, 'metrics: { host: 0.0.0.0, port: 0 }\n');
      const r = await orderly(['validate', job]);
      expect(r.code).toBe(2);
      expect(r.out).toContain('metrics: refusing to serve on 0.0.0.0');
      expect(r.out).toContain('metrics.allowRemote');
      writeFileSync(job, 'metrics:\n  host: 0.0.0.0\n  port: 0\n  allowRemote: true\n  authToken: ${ORDERLY_METRICS_TOKEN}\n');
      expect((await orderly(['validate', job], { ORDERLY_METRICS_TOKEN: TOKEN })).code).toBe(0);
    } finally {
      dir.remove();
    }
  });

  it('a job whose metrics server is bound off loopback warns at start, as the endpoint does (it said nothing)', async () => {
    const dir = tempDir();
    const job = join(dir.path, 'job.yaml');
    writeFileSync(
      job,
      'dataDir: ./data\ndurability: process\nmetrics:\n  host: 0.0.0.0\n  port: 0\n  allowRemote: true\n  authToken: ${ORDERLY_METRICS_TOKEN}\n',
    );
    const run = new OrderlyRunProcess(job, [], { ORDERLY_METRICS_TOKEN: TOKEN });
    try {
      await run.ready;
      expect(run.output()).toContain('the metrics server (/metrics, /status) is reachable from other machines');
      expect(run.output()).not.toContain(TOKEN);
    } finally {
      run.kill('SIGTERM');
      await run.exited;
      dir.remove();
    }
  });

  it('with metrics.authToken, /metrics and /status need the token and orderly status sends it; an IPv6 host works', async () => {
    const dir = tempDir();
    const job = join(dir.path, 'job.yaml');
    const yaml = (host: string) =>
      `dataDir: ./data\ndurability: process\nmetrics:\n  host: "${host}"\n  port: 0\n  authToken: \${ORDERLY_METRICS_TOKEN}\n` +
      'topics: [{ name: metrics-topic }]\nsubscriptions: [{ name: metrics-sub, topic: metrics-topic }]\n';
    writeFileSync(job, yaml('::1'));
    const env = { ...process.env, ORDERLY_METRICS_TOKEN: TOKEN, ORDERLY_LOG_LEVEL: 'info' };
    const child = spawn(process.execPath, [bin, 'run', job], { stdio: ['ignore', 'pipe', 'pipe'], env });
    let out = '';
    child.stdout.on('data', (c) => (out += c));
    child.stderr.on('data', (c) => (out += c));
    try {
      const lock = join(dir.path, 'data', 'orderly.lock');
      await waitFor(
        'the metrics server',
        () => {
          if (child.exitCode !== null) throw new Error(`orderly run exited ${child.exitCode}: ${out}`);
          return existsSync(lock) && JSON.parse(readFileSync(lock, 'utf8')).metrics !== undefined;
        },
        30_000,
      );
      const metrics = JSON.parse(readFileSync(lock, 'utf8')).metrics as string;
      expect(metrics).toMatch(/^http:\/\/\[::1\]:\d+$/);
      for (const path of ['/metrics', '/status']) {
        expect((await fetch(`${metrics}${path}`)).status).toBe(401);
        expect((await fetch(`${metrics}${path}`, { headers: { authorization: 'Bearer wrong-token-0123456789' } })).status).toBe(401);
        expect((await fetch(`${metrics}${path}`, { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(200);
      }
      const status = await orderly(['status', job, '--json'], { ORDERLY_METRICS_TOKEN: TOKEN });
      expect(status.code).toBe(0);
      expect(status.out).toContain('metrics-sub');
      const refused = await orderly(['status', job, '--json'], { ORDERLY_METRICS_TOKEN: 'another-token-0123456789' });
      expect(refused.code).not.toBe(0);
      expect(refused.out).toContain('HTTP 401');
      expect(out + status.out + refused.out).not.toContain(TOKEN);
    } finally {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await new Promise((r) => child.once('exit', r));
      }
      dir.remove();
    }
  });

  it('holds at most 100 connections, as the endpoint caps its own', async () => {
    const dir = tempDir();
    const job = join(dir.path, 'job.yaml');
    writeFileSync(job, 'dataDir: ./data\ndurability: process\nmetrics: { port: 0 }\n');
    const child = spawn(process.execPath, [bin, 'run', job], { stdio: 'ignore' });
    const sockets: Socket[] = [];
    try {
      const lock = join(dir.path, 'data', 'orderly.lock');
      await waitFor('the metrics server', () => existsSync(lock) && JSON.parse(readFileSync(lock, 'utf8')).metrics !== undefined, 30_000);
      const { port } = new URL(JSON.parse(readFileSync(lock, 'utf8')).metrics as string);
      // Before: every one stayed open (no cap), each holding a socket of the job's.
      let closed = 0;
      for (let i = 0; i < 120; i++) {
        const socket = connect(Number(port), '127.0.0.1');
        socket.on('error', () => {});
        socket.on('close', () => closed++);
        sockets.push(socket);
      }
      await waitFor('the connections over the cap to be closed', () => closed >= 20, 5_000);
    } finally {
      for (const socket of sockets) socket.destroy();
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await new Promise((r) => child.once('exit', r));
      }
      dir.remove();
    }
  });
});

describe('a bearer token is checked on every call (issue #9.6)', () => {
  let server: ServeProcess;
  beforeAll(async () => {
    server = await startServe(['--auth-token', TOKEN]);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('REST: a missing or wrong token is 401 UNAUTHENTICATED; the right one passes', async () => {
    const url = `http://${server.host}/v1/projects/auth/topics/rest-topic`;
    for (const authorization of [undefined, 'Bearer wrong-token-0123456789abcdef', `Basic ${TOKEN}`, `Bearer ${TOKEN}x`, 'Bearer']) {
      const res = await fetch(url, { method: 'PUT', body: '{}', headers: authorization ? { authorization } : {} });
      expect(res.status, authorization).toBe(401);
      expect(res.headers.get('www-authenticate')).toBe('Bearer');
      expect((await res.json()).error).toMatchObject({ code: 401, status: 'UNAUTHENTICATED' });
    }
    expect((await fetch(url, { method: 'PUT', body: '{}', headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(200);
    expect((await fetch(url, { headers: { authorization: `bearer ${TOKEN}` } })).status).toBe(200);
  });

  it('REST: the token may come as the access_token query parameter, as Google takes it; a wrong one is 401', async () => {
    const url = `http://${server.host}/v1/projects/auth/topics/query-topic`;
    expect((await fetch(`${url}?access_token=${encodeURIComponent(TOKEN)}`, { method: 'PUT', body: '{}' })).status).toBe(200);
    const wrong = await fetch(`${url}?access_token=wrong-token-0123456789abcdef`);
    expect(wrong.status).toBe(401);
    expect((await wrong.json()).error).toMatchObject({ code: 401, status: 'UNAUTHENTICATED' });
    // The header, when sent, is the credential: a right query parameter does not make up for a wrong header.
    const both = await fetch(`${url}?access_token=${encodeURIComponent(TOKEN)}`, {
      headers: { authorization: 'Bearer wrong-token-0123456789abcdef' },
    });
    expect(both.status).toBe(401);
  });

  it('gRPC: calls and streams without the token are UNAUTHENTICATED', async () => {
    const api = rawPubsubClients(server.host);
    try {
      await expect(api.pub('createTopic', { name: 'projects/auth/topics/grpc-topic' })).rejects.toMatchObject({
        code: grpc.status.UNAUTHENTICATED,
      });
      const wrong = new grpc.Metadata();
      wrong.set('authorization', 'Bearer not-the-token-0123456789');
      await expect(api.pub('createTopic', { name: 'projects/auth/topics/grpc-topic' }, wrong)).rejects.toMatchObject({
        code: grpc.status.UNAUTHENTICATED,
      });
      const stream = api.subscriber.streamingPull();
      const ended = new Promise<grpc.ServiceError>((resolve) => stream.on('error', resolve));
      stream.write({ subscription: 'projects/auth/subscriptions/none', streamAckDeadlineSeconds: 10 });
      expect((await ended).code).toBe(grpc.status.UNAUTHENTICATED);
      const right = new grpc.Metadata();
      right.set('authorization', `Bearer ${TOKEN}`);
      expect(await api.pub('createTopic', { name: 'projects/auth/topics/grpc-topic' }, right)).toMatchObject({
        name: 'projects/auth/topics/grpc-topic',
      });
    } finally {
      api.close();
    }
  });

  it("Google's Node client sends the token through grpc.callInvocationTransformer (the README snippet)", async () => {
    const withToken = new PubSub({
      projectId: 'auth',
      apiEndpoint: server.host,
      emulatorMode: true,
      // grpc-js lets a client rewrite each call before it starts: add the bearer token to its metadata.
      'grpc.callInvocationTransformer': (call: grpc.CallProperties<unknown, unknown>) => {
        call.metadata.set('authorization', `Bearer ${TOKEN}`);
        return call;
      },
    } as ConstructorParameters<typeof PubSub>[0]);
    const without = new PubSub({ projectId: 'auth', apiEndpoint: server.host, emulatorMode: true });
    try {
      const [topic] = await withToken.createTopic('client-topic');
      const [subscription] = await topic.createSubscription('client-sub');
      await topic.publishMessage({ data: Buffer.from('hello') });
      const received = await new Promise<string>((resolve, reject) => {
        subscription.on('message', (m) => {
          m.ack();
          resolve(m.data.toString());
        });
        subscription.on('error', reject);
      });
      expect(received).toBe('hello');
      await subscription.close();
      await expect(without.topic('client-topic').publishMessage({ data: Buffer.from('no') })).rejects.toMatchObject({
        code: grpc.status.UNAUTHENTICATED,
      });
    } finally {
      await withToken.close();
      await without.close();
    }
  });
});

describe('idle connections are closed (issue #9.6)', () => {
  let server: ServeProcess;
  beforeAll(async () => {
    server = await startServe(['--idle-timeout', '1']);
  });
  afterAll(async () => {
    await server?.stop();
  });

  /** Opens a socket, sends `bytes`, and resolves with how long the server kept it open (ms). */
  function openFor(bytes: string | undefined): Promise<number> {
    return new Promise((resolve, reject) => {
      const start = Date.now();
      const socket: Socket = connect(server.port, '127.0.0.1', () => {
        if (bytes !== undefined) socket.write(bytes);
      });
      socket.on('data', () => undefined);
      socket.on('error', () => undefined);
      socket.on('close', () => resolve(Date.now() - start));
      // Far beyond the 1 s timeout: a socket still open then was never going to be closed.
      setTimeout(() => {
        socket.destroy();
        reject(new Error(`the server kept a socket open for 20 s (sent ${JSON.stringify(bytes)})`));
      }, 20_000).unref();
    });
  }

  it('a socket that sends nothing, a bare HTTP/2 preface, or half an HTTP/1 request head is closed after the idle timeout', async () => {
    const kept = await Promise.all([
      openFor(undefined),
      openFor('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'),
      openFor('GET /v1/projects/p/topics HTTP/1.1\r\nHost: x\r\n'),
      openFor('GET /v1/projects/p/topics HTTP/1.1\r\nHost: x\r\n\r\n'),
    ]);
    // Closed, and not before the timeout (1 s) had passed.
    for (const ms of kept) expect(ms).toBeGreaterThanOrEqual(900);
  });

  it('a REST client that does not read its answer is closed after the idle timeout (it held a pull of megabytes for good)', async () => {
    const api = rawPubsubClients(server.host);
    try {
      const topic = 'projects/unread/topics/unread-topic';
      const subscription = 'projects/unread/subscriptions/unread-sub';
      await api.pub('createTopic', { name: topic });
      await api.sub('createSubscription', { name: subscription, topic });
      // A pull answer of ~12 MB of JSON: more than the socket takes at once.
      for (let i = 0; i < 9; i++) await api.pub('publish', { topic, messages: [{ data: Buffer.alloc(1_000_000, i) }] });
      const socket = connect(server.port, '127.0.0.1');
      socket.on('error', () => undefined);
      socket.pause();
      const pull = JSON.stringify({ maxMessages: 100, returnImmediately: true });
      socket.write(
        `POST /v1/${subscription}:pull HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${pull.length}\r\n\r\n${pull}`,
      );
      let received = '';
      // The answer's first chunk, then no more reading: the server has built the answer and is writing it (on a
      // loaded machine building 12 MB of JSON took longer than the wait below, which then raced the idle timer).
      await new Promise((resolve) => {
        socket.once('data', (c: Buffer) => {
          socket.pause();
          received += c.toString('latin1');
          resolve(undefined);
        });
        socket.resume();
      });
      // Several idle timeouts without reading; then a second request on the connection, and everything read.
      await new Promise((r) => setTimeout(r, 3_000));
      socket.write('GET /v1/projects/unread/topics HTTP/1.1\r\nHost: x\r\n\r\n');
      socket.on('data', (c: Buffer) => (received += c.toString('latin1')));
      socket.resume();
      await new Promise((resolve) => socket.on('close', resolve));
      // The connection was closed while the answer waited: the second request was never answered.
      expect(received).not.toContain('"topics"');
    } finally {
      api.close();
    }
  });

  it('work in progress is not idle: a streaming pull and a REST long poll outlive the timeout', async () => {
    const api = rawPubsubClients(server.host);
    try {
      await api.pub('createTopic', { name: 'projects/idle/topics/idle-topic' });
      await api.sub('createSubscription', { name: 'projects/idle/subscriptions/idle-sub', topic: 'projects/idle/topics/idle-topic' });
      const stream = api.subscriber.streamingPull();
      const received: string[] = [];
      let failed: unknown;
      stream.on('data', (r: any) => received.push(...r.receivedMessages.map((m: any) => m.message.data.toString())));
      stream.on('error', (e: unknown) => (failed = e));
      stream.write({ subscription: 'projects/idle/subscriptions/idle-sub', streamAckDeadlineSeconds: 10 });
      // A REST pull that waits (no returnImmediately): several idle timeouts long, then answered.
      const started = Date.now();
      const pulled = await fetch(`http://${server.host}/v1/projects/idle/subscriptions/idle-sub:pull`, {
        method: 'POST',
        body: JSON.stringify({ maxMessages: 1 }),
      });
      expect(pulled.status).toBe(200);
      expect(Date.now() - started).toBeGreaterThanOrEqual(3_000);
      await api.pub('publish', { topic: 'projects/idle/topics/idle-topic', messages: [{ data: Buffer.from('late') }] });
      const end = Date.now() + 20_000;
      while (!received.includes('late') && !failed && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
      expect(failed).toBeUndefined();
      expect(received).toEqual(['late']);
      stream.end();
    } finally {
      api.close();
    }
  });
});
