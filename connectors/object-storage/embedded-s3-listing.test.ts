import { PutObjectCommand } from '@aws-sdk/client-s3';
import { expect, it } from 'vitest';
import { tempDir } from '../../test/helpers/temp-dir.js';
import { listObjectNames, minioClient } from '../../test/helpers/s3.js';
import { startEmbeddedS3 } from './embedded-s3.js';
import { createS3Client, s3Connection } from './s3-client.js';

// Pub/Sub's default datetime format puts "+00:00" in every object name. The `minio` client (as mc, and the
// AWS CLI) lists with encoding-type=url and decodes what it gets; s3rver ignored the parameter, so "+" was
// listed as a space (a GET by that name: NoSuchKey) and a "%" in a name failed the listing ("URI malformed").
it("the embedded S3 server's listings give clients that ask for URL-encoded names every object's exact name", async () => {
  const dir = tempDir();
  const s3 = await startEmbeddedS3(dir.path, ['names-bucket']);
  const writer = createS3Client(s3Connection(s3.settings));
  const keys = [
    'events/2026-12-06T02:15:54+00:00_0000000000000001-84fb239fd1a9.avro',
    'a b/%23#?+ü=&;,$@/x.txt',
    'percent/100%.txt',
  ].sort();
  try {
    for (const key of keys) await writer.send(new PutObjectCommand({ Bucket: 'names-bucket', Key: key, Body: key }));
    const minio = minioClient(s3.settings);
    const listed = await listObjectNames(minio, 'names-bucket');
    expect(listed).toEqual(keys);
    for (const name of listed) {
      const chunks: Buffer[] = [];
      for await (const c of await minio.getObject('names-bucket', name)) chunks.push(c as Buffer);
      expect(Buffer.concat(chunks).toString()).toBe(name);
    }
    // A prefix and a delimiter come back as given; common prefixes by their exact names too.
    const prefixes: string[] = [];
    for await (const o of minio.listObjectsV2('names-bucket', 'a b/', false)) if ('prefix' in o && o.prefix) prefixes.push(o.prefix);
    expect(prefixes).toEqual(['a b/%23#?+ü=&;,$@/']);
  } finally {
    writer.destroy();
    await s3.close();
    dir.remove();
  }
});
