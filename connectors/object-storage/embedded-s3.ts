import S3rver from 's3rver';
import { mkdirSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';

export interface EmbeddedS3 {
  settings: { endpoint: string; region: string; accessKeyId: string; secretAccessKey: string; forcePathStyle: boolean };
  close(): Promise<void>;
}

/** An S3 server (s3rver) on 127.0.0.1 storing under `<dataDir>/s3`, for jobs with no external endpoint. */
export async function startEmbeddedS3(dataDir: string, buckets: string[]): Promise<EmbeddedS3> {
  const directory = join(dataDir, 's3');
  mkdirSync(directory, { recursive: true });
  const server = new S3rver({
    address: '127.0.0.1',
    port: 0,
    directory,
    silent: true,
    configureBuckets: buckets.map((name) => ({ name, configs: [] })),
  });
  keepDirectoriesOnDelete(server);
  const { port } = await server.run();
  return {
    // s3rver accepts these fixed credentials; they protect nothing and are never logged.
    settings: {
      endpoint: `http://127.0.0.1:${port}`,
      region: 'us-east-1',
      accessKeyId: 'S3RVER',
      secretAccessKey: 'S3RVER',
      forcePathStyle: true,
    },
    close: () => server.close(),
  };
}

/** The part of s3rver's file-system store a delete uses. */
interface FilesystemStore {
  getResourcePath(bucket: string, key: string, resource: string): string;
  deleteObject(bucket: string, key: string): Promise<void>;
}

/**
 * s3rver (3.7) removes a key's directory once a delete leaves it empty; a PutObject into that directory
 * between its mkdir and its write then fails on a file stream nothing listens to, and the error ends the
 * process s3rver runs in (a fleet's pending-upload markers, put and deleted side by side by two upload lanes,
 * did it in the benchmarks). Here a delete removes the object's files and leaves directories: an empty
 * directory holds no object, so listings are the same.
 */
export function keepDirectoriesOnDelete(server: S3rver): void {
  const store = (server as unknown as { store: FilesystemStore }).store;
  store.deleteObject = async (bucket, key) => {
    await Promise.all(
      ['object', 'object.md5', 'metadata.json'].map((resource) => rm(store.getResourcePath(bucket, key, resource), { force: true })),
    );
  };
}
