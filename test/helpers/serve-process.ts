import * as grpc from '@grpc/grpc-js';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll } from 'vitest';
import { loadPubsubProto } from '../../src/api/pubsub-proto.js';
import { tempDir } from './temp-dir.js';

const bin = fileURLToPath(new URL('../../bin/orderly.js', import.meta.url));

export interface ServeProcess {
  /** host:port, as PUBSUB_EMULATOR_HOST takes it. */
  host: string;
  port: number;
  child: ChildProcess;
  /** What the server printed on stdout and stderr so far. */
  output(): string;
  alive(): boolean;
  stop(): Promise<void>;
}

/** A real `orderly serve --port 0` in a child process (its own temp data dir unless args give one). */
export async function startServe(args: string[] = [], env: NodeJS.ProcessEnv = {}): Promise<ServeProcess> {
  const dir = args.includes('--config') || args.includes('--data-dir') ? undefined : tempDir();
  const child = spawn(process.execPath, [bin, 'serve', '--port', '0', ...(dir ? ['--data-dir', dir.path] : []), ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ORDERLY_LOG_LEVEL: 'info', ...env },
  });
  let out = '';
  child.stdout.on('data', (c) => (out += c));
  child.stderr.on('data', (c) => (out += c));
  let exited = false;
  const exit = new Promise<void>((resolve) =>
    child.once('exit', () => {
      exited = true;
      resolve();
    }),
  );
  const host = await new Promise<string>((resolve, reject) => {
    const check = () => {
      const m = /PUBSUB_EMULATOR_HOST=(\S+)\)/.exec(out);
      if (m) resolve(m[1]!);
    };
    child.stdout.on('data', check);
    void exit.then(() => reject(new Error(`orderly serve exited (${child.exitCode}): ${out}`)));
  });
  return {
    host,
    port: Number(host.slice(host.lastIndexOf(':') + 1)),
    child,
    output: () => out,
    alive: () => !exited,
    async stop() {
      if (!exited) child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exit;
      clearTimeout(killer);
      dir?.remove();
    },
  };
}

/** Raw gRPC stubs for google.pubsub.v1 (Publisher, Subscriber, SchemaService) and google.iam.v1.IAMPolicy, for requests Google's client would never send. */
export function rawPubsubClients(host: string, options: grpc.ChannelOptions = {}) {
  const proto = loadPubsubProto() as any;
  const v1 = proto.google.pubsub.v1;
  const publisher = new v1.Publisher(host, grpc.credentials.createInsecure(), options) as grpc.Client & Record<string, any>;
  const subscriber = new v1.Subscriber(host, grpc.credentials.createInsecure(), options) as grpc.Client & Record<string, any>;
  const schemaService = new v1.SchemaService(host, grpc.credentials.createInsecure(), options) as grpc.Client & Record<string, any>;
  const iam = new proto.google.iam.v1.IAMPolicy(host, grpc.credentials.createInsecure(), options) as grpc.Client & Record<string, any>;
  /** A unary call as a promise: resolves with the response, rejects with the ServiceError. */
  const call = (
    client: grpc.Client & Record<string, any>,
    method: string,
    request: unknown,
    metadata = new grpc.Metadata(),
  ): Promise<any> =>
    new Promise((resolve, reject) =>
      client[method](request, metadata, (e: grpc.ServiceError | null, r: unknown) => (e ? reject(e) : resolve(r))),
    );
  return {
    publisher,
    subscriber,
    schemaService,
    iam,
    pub: (method: string, request: unknown, metadata?: grpc.Metadata) => call(publisher, method, request, metadata),
    sub: (method: string, request: unknown, metadata?: grpc.Metadata) => call(subscriber, method, request, metadata),
    schema: (method: string, request: unknown, metadata?: grpc.Metadata) => call(schemaService, method, request, metadata),
    policy: (method: string, request: unknown, metadata?: grpc.Metadata) => call(iam, method, request, metadata),
    close() {
      publisher.close();
      subscriber.close();
      schemaService.close();
      iam.close();
    },
  };
}

export type RawPubsubClients = ReturnType<typeof rawPubsubClients>;

/** `startServe` with raw gRPC stubs to it (`rawPubsubClients`); the server's `stop()` closes the stubs first. */
export async function startServeWithClients(
  args: string[] = [],
  env: NodeJS.ProcessEnv = {},
): Promise<{ server: ServeProcess; api: RawPubsubClients }> {
  const server = await startServe(args, env);
  const api = rawPubsubClients(server.host);
  const stop = () => server.stop();
  return {
    server: {
      ...server,
      async stop() {
        api.close();
        await stop();
      },
    },
    api,
  };
}

/**
 * One `startServeWithClients` for the test file (or describe block) it is called in: started before its
 * tests, stopped after them. `server` and `api` stand for the live ones: use them inside tests and hooks.
 */
export function servePerFile(args: string[] = []): { server: ServeProcess; api: RawPubsubClients } {
  let live: { server: ServeProcess; api: RawPubsubClients } | undefined;
  beforeAll(async () => {
    live = await startServeWithClients(args);
  });
  afterAll(async () => {
    await live?.server.stop();
  });
  const current = () => {
    if (!live) throw new Error('servePerFile: the server starts in beforeAll; use it inside tests and hooks');
    return live;
  };
  return {
    server: new Proxy({} as ServeProcess, { get: (_, key) => Reflect.get(current().server, key) as unknown }),
    api: new Proxy({} as RawPubsubClients, { get: (_, key) => Reflect.get(current().api, key) as unknown }),
  };
}
