import S3rver from 's3rver';
import { mkdirSync } from 'node:fs';
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
