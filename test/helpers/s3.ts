import * as Minio from 'minio';
import S3rver from 's3rver';
import { randomUUID } from 'node:crypto';
import { hardenStore } from '../../connectors/object-storage/embedded-s3.js';
import { encodeListingsOnRequest } from '../../connectors/object-storage/s3rver-list-encoding.js';
import { tempDir } from './temp-dir.js';

/**
 * An S3 endpoint for tests: s3rver on 127.0.0.1 (the local stand-in for MinIO), or real MinIO/S3 when
 * S3_ENDPOINT, S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY are set. Objects are read back with the
 * `minio` client, independently of the writer's @aws-sdk/client-s3.
 */
export interface TestS3 {
  settings: { endpoint: string; region: string; accessKeyId: string; secretAccessKey: string; forcePathStyle: boolean };
  minio: Minio.Client;
  /** A fresh bucket name (created unless `create` is false). */
  bucket(create?: boolean): Promise<string>;
  list(bucket: string, prefix?: string): Promise<string[]>;
  get(bucket: string, key: string): Promise<Buffer>;
  /** s3rver only: stop answering (an outage) and come back on the same port with the same data. */
  stop(): Promise<void>;
  start(): Promise<void>;
  close(): Promise<void>;
  local: boolean;
}

export async function startTestS3(): Promise<TestS3> {
  const external = process.env.S3_ENDPOINT;
  const dir = tempDir('orderly-s3-');
  let server: S3rver | undefined;
  let port = 0;
  const run = async () => {
    server = new S3rver({ port, address: '127.0.0.1', directory: dir.path, silent: true });
    hardenStore(server);
    encodeListingsOnRequest(server);
    port = (await server.run()).port;
  };
  if (!external) await run();
  const endpoint = external ?? `http://127.0.0.1:${port}`;
  const accessKeyId = external ? process.env.S3_ACCESS_KEY_ID! : 'S3RVER';
  const secretAccessKey = external ? process.env.S3_SECRET_ACCESS_KEY! : 'S3RVER';
  const minio = minioClient({ endpoint, accessKeyId, secretAccessKey });
  return {
    settings: { endpoint, region: 'us-east-1', accessKeyId, secretAccessKey, forcePathStyle: true },
    minio,
    local: !external,
    async bucket(create = true) {
      const name = `orderly-test-${randomUUID().slice(0, 8)}`;
      if (create) await minio.makeBucket(name);
      return name;
    },
    list: (bucket, prefix) => listObjectNames(minio, bucket, prefix),
    async get(bucket, key) {
      const chunks: Buffer[] = [];
      for await (const c of await minio.getObject(bucket, key)) chunks.push(c as Buffer);
      return Buffer.concat(chunks);
    },
    async stop() {
      if (!server) throw new Error('outage tests need the local s3rver');
      await server.close();
      server = undefined;
    },
    async start() {
      await run();
    },
    async close() {
      if (server) await server.close();
      dir.remove();
    },
  };
}

/** The independent reader of an S3 endpoint: the `minio` client, path-style, for the endpoint's settings. */
export function minioClient(settings: { endpoint: string; accessKeyId: string; secretAccessKey: string }): Minio.Client {
  const url = new URL(settings.endpoint);
  return new Minio.Client({
    endPoint: url.hostname,
    port: Number(url.port) || (url.protocol === 'https:' ? 443 : 80),
    useSSL: url.protocol === 'https:',
    accessKey: settings.accessKeyId,
    secretKey: settings.secretAccessKey,
    pathStyle: true,
  });
}

/** The names of a bucket's objects under `prefix`, sorted, as the `minio` client lists them. */
export async function listObjectNames(minio: Minio.Client, bucket: string, prefix = ''): Promise<string[]> {
  const names: string[] = [];
  for await (const o of minio.listObjectsV2(bucket, prefix, true))
    if ((o as { name?: string }).name) names.push((o as { name: string }).name);
  return names.sort();
}
