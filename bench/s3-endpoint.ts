import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { createS3Client, s3Connection } from '../connectors/object-storage/s3-client.js';
import { tempDir } from '../test/helpers/temp-dir.js';
import { benchModule } from './paths.js';

export interface BenchS3 {
  settings: Record<string, unknown>;
  bucket(): Promise<string>;
  close(): Promise<void>;
}

/**
 * The benchmarks' S3: real MinIO/S3 when S3_ENDPOINT (and keys) are set, else s3rver in its own process
 * on 127.0.0.1, as a MinIO server would be, so its work does not run on the exporter's thread.
 */
export async function startBenchS3(): Promise<BenchS3> {
  const external = process.env.S3_ENDPOINT;
  const dir = tempDir('orderly-bench-s3-');
  let stop = async () => dir.remove();
  let endpoint = external;
  if (!endpoint) {
    const child = spawn(process.execPath, [...process.execArgv, fileURLToPath(benchModule('s3rver-process')), dir.path], {
      // stdin: held open for the child's life, its way to notice that this process is gone (s3rver-process.ts).
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    const exited = once(child, 'exit').then(([code]) => {
      throw new Error(`s3rver exited (code ${String(code)}) before it listened`);
    });
    const [line] = (await Promise.race([once(child.stdout, 'data'), exited])) as [Buffer];
    exited.catch(() => {}); // once listening, its exit is awaited by stop()
    // Nothing reads the pipe after the port: drain it, or a full pipe would stop s3rver on its next write.
    child.stdout.resume();
    endpoint = `http://127.0.0.1:${Number(line.toString())}`;
    stop = async () => {
      child.kill();
      await once(child, 'exit');
      dir.remove();
    };
  }
  const settings = {
    endpoint,
    region: 'us-east-1',
    accessKeyId: external ? process.env.S3_ACCESS_KEY_ID : 'S3RVER',
    secretAccessKey: external ? process.env.S3_SECRET_ACCESS_KEY : 'S3RVER',
    forcePathStyle: true,
  };
  const client = createS3Client(s3Connection(settings));
  return {
    settings,
    async bucket() {
      const name = `orderly-bench-${randomUUID().slice(0, 8)}`;
      await client.send(new CreateBucketCommand({ Bucket: name }));
      return name;
    },
    async close() {
      client.destroy();
      await stop();
    },
  };
}
