import S3rver from 's3rver';
import { createHash } from 'node:crypto';
import { createReadStream, mkdirSync } from 'node:fs';
import { readFile, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { encodeListingsOnRequest } from './s3rver-list-encoding.js';

export interface EmbeddedS3 {
  settings: { endpoint: string; region: string; accessKeyId: string; secretAccessKey: string; forcePathStyle: boolean };
  close(): Promise<void>;
}

/**
 * An S3 server (s3rver) on 127.0.0.1 storing under `<dataDir>/s3`, for jobs with no external endpoint.
 * `readOnly` (orderly query) creates neither the folder nor `buckets`: a bucket the job never made holds
 * no object to read, and a query had created the folders of buckets added to the job file since its run.
 */
export async function startEmbeddedS3(dataDir: string, buckets: string[], { readOnly = false } = {}): Promise<EmbeddedS3> {
  const directory = join(dataDir, 's3');
  if (!readOnly) mkdirSync(directory, { recursive: true });
  const server = new S3rver({
    address: '127.0.0.1',
    port: 0,
    directory,
    silent: true,
    configureBuckets: (readOnly ? [] : buckets).map((name) => ({ name, configs: [] })),
  });
  hardenStore(server, { readOnly });
  encodeListingsOnRequest(server);
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

/** How long a metadata file that does not parse is given to be finished by a write in progress. */
const TORN_METADATA_RECHECK_MS = 100;

/** The parts of s3rver's file-system store patched here. */
interface FilesystemStore {
  getResourcePath(bucket: string, key: string, resource: string): string;
  deleteObject(bucket: string, key: string): Promise<void>;
  getMetadata(bucket: string, key: string): Promise<Record<string, unknown>>;
}

/**
 * Makes s3rver's (3.7) file-system store survive what a crash or a busy job does to it (the embedded S3
 * server of `objectStorage.embedded`, and the S3 server of the tests and benchmarks):
 * - s3rver removes a key's directory once a delete leaves it empty; a PutObject into that directory
 *   between its mkdir and its write then fails on a file stream nothing listens to, and the error ends the
 *   process s3rver runs in (a fleet's pending-upload markers, put and deleted side by side by two upload
 *   lanes, did it in the benchmarks). Here a delete removes the object's files and leaves directories: an
 *   empty directory holds no object, so listings are the same.
 * - s3rver writes an object's metadata file in place: a `kill -9` in the middle leaves it empty, and from
 *   then on every listing of the bucket, and so every export to it, failed with HTTP 500 for good. Metadata
 *   that does not parse now reads as none (the object's content type and user metadata, which Orderly
 *   does not set); the object itself, an upload the crash cut short, is what the manifest's recovery
 *   deletes. `readOnly` (a read-only command's server) repairs nothing: such metadata reads as none, and
 *   the file stays as it is, as does a missing checksum file, which s3rver writes when it reads the object.
 */
export function hardenStore(server: S3rver, { readOnly = false } = {}): void {
  const store = (server as unknown as { store: FilesystemStore }).store;
  store.deleteObject = async (bucket, key) => {
    await Promise.all(
      ['object', 'object.md5', 'metadata.json'].map((resource) => rm(store.getResourcePath(bucket, key, resource), { force: true })),
    );
  };
  if (readOnly) {
    store.getMetadata = (bucket, key) => metadataAsStored(store, bucket, key);
    return;
  }
  const getMetadata = store.getMetadata.bind(store);
  store.getMetadata = async (bucket, key) => {
    try {
      return await getMetadata(bucket, key);
    } catch (e) {
      if (!(e instanceof SyntaxError)) throw e;
      // A PutObject of this key may be writing it right now: torn is what it still is a moment later.
      await new Promise((resolve) => setTimeout(resolve, TORN_METADATA_RECHECK_MS));
      try {
        return await getMetadata(bucket, key);
      } catch (again) {
        if (!(again instanceof SyntaxError)) throw again;
      }
      await rm(store.getResourcePath(bucket, key, 'metadata.json'), { force: true });
      return getMetadata(bucket, key);
    }
  };
}

/**
 * What s3rver's getMetadata (3.7) answers, read without writing: metadata that does not parse is none, and
 * an object without its checksum file has its ETag computed from its content instead of stored. A missing
 * object rejects with ENOENT, as s3rver's own does (its callers answer NoSuchKey).
 */
async function metadataAsStored(store: FilesystemStore, bucket: string, key: string): Promise<Record<string, unknown>> {
  const objectPath = store.getResourcePath(bucket, key, 'object');
  const stats = await stat(objectPath);
  const [stored, md5] = await Promise.all([storedMetadata(store.getResourcePath(bucket, key, 'metadata.json')), storedMd5(objectPath)]);
  return { ...stored, etag: JSON.stringify(md5), 'last-modified': stats.mtime.toUTCString(), 'content-length': stats.size };
}

async function storedMetadata(path: string): Promise<Record<string, unknown> | undefined> {
  let text;
  try {
    text = await readFile(path, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
  try {
    return JSON.parse(text) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

async function storedMd5(objectPath: string): Promise<string> {
  try {
    return await readFile(`${objectPath}.md5`, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  const hash = createHash('md5');
  for await (const chunk of createReadStream(objectPath)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}
