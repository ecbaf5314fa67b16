import { CreateBucketCommand, DeleteObjectCommand, GetObjectCommand, HeadBucketCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { createHash } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { startEmbeddedS3 } from '../../connectors/object-storage/embedded-s3.js';
import { createS3Client, s3Connection } from '../../connectors/object-storage/s3-client.js';
import { files } from '../helpers/dir-contents.js';
import { tempDir } from '../helpers/temp-dir.js';
import { listObjectNames, minioClient } from '../helpers/s3.js';

// s3rver removed a directory that a delete left empty while a put was about to write into it: the put's
// file stream failed with nothing listening, and the error ended the process (a job with `embedded: true`,
// or the S3 server of the tests and benchmarks). Deletes now leave directories.
it('the embedded S3 server survives deletes and puts side by side in one directory, and keeps exactly the puts', async () => {
  const dir = tempDir();
  const s3 = await startEmbeddedS3(dir.path, []);
  const client = createS3Client(s3Connection(s3.settings));
  try {
    await client.send(new CreateBucketCommand({ Bucket: 'race-bucket' }));
    const put = (key: string) => client.send(new PutObjectCommand({ Bucket: 'race-bucket', Key: key, Body: key }));
    const del = (key: string) => client.send(new DeleteObjectCommand({ Bucket: 'race-bucket', Key: key }));
    for (let i = 0; i < 50; i++) {
      await put(`pending/${i}`);
      // Each delete takes the directory's last object while a put goes into the same directory.
      await Promise.all([del(`pending/${i}`), put(`pending/${i}-next`), i > 0 ? del(`pending/${i - 1}-next`) : undefined]);
    }
    expect(await listObjectNames(minioClient(s3.settings), 'race-bucket')).toEqual(['pending/49-next']);
  } finally {
    client.destroy();
    await s3.close();
    dir.remove();
  }
});

// A `kill -9` while s3rver wrote an object's metadata file left it empty; from then on every listing of the
// bucket failed with HTTP 500, and the job's object exports stayed in RESOURCE_ERROR across restarts.
it('an object metadata file a crash left empty fails nothing: listings, HEAD and GET of the bucket answer', async () => {
  const dir = tempDir();
  const s3 = await startEmbeddedS3(dir.path, ['torn-bucket']);
  const client = createS3Client(s3Connection(s3.settings));
  try {
    for (const key of ['a/first.txt', 'a/second.txt'])
      await client.send(new PutObjectCommand({ Bucket: 'torn-bucket', Key: key, Body: key, ContentType: 'text/plain' }));
    writeFileSync(join(dir.path, 's3', 'torn-bucket', 'a', 'first.txt._S3rver_metadata.json'), '');
    await client.send(new HeadBucketCommand({ Bucket: 'torn-bucket' }));
    expect(await listObjectNames(minioClient(s3.settings), 'torn-bucket')).toEqual(['a/first.txt', 'a/second.txt']);
    const got = await client.send(new GetObjectCommand({ Bucket: 'torn-bucket', Key: 'a/first.txt' }));
    expect(await got.Body!.transformToString()).toBe('a/first.txt');
    const intact = await client.send(new GetObjectCommand({ Bucket: 'torn-bucket', Key: 'a/second.txt' }));
    expect(intact.ContentType).toBe('text/plain');
  } finally {
    client.destroy();
    await s3.close();
    dir.remove();
  }
});

// A read-only command's server (orderly query, orderly audit) had deleted the metadata file it found torn,
// and written the checksum file of an object that had none: a command that changes nothing changed the bucket.
it('a read-only embedded S3 server answers around a torn metadata file and a missing checksum, and writes neither', async () => {
  const dir = tempDir();
  const folder = join(dir.path, 's3', 'torn-bucket', 'a');
  try {
    const writing = await startEmbeddedS3(dir.path, ['torn-bucket']);
    const writer = createS3Client(s3Connection(writing.settings));
    for (const key of ['a/first.txt', 'a/second.txt'])
      await writer.send(new PutObjectCommand({ Bucket: 'torn-bucket', Key: key, Body: key, ContentType: 'text/plain' }));
    writer.destroy();
    await writing.close();
    writeFileSync(join(folder, 'first.txt._S3rver_metadata.json'), '');
    rmSync(join(folder, 'second.txt._S3rver_object.md5'));
    const before = files(dir.path);

    const s3 = await startEmbeddedS3(dir.path, ['torn-bucket'], { readOnly: true });
    const client = createS3Client(s3Connection(s3.settings));
    try {
      expect(await listObjectNames(minioClient(s3.settings), 'torn-bucket')).toEqual(['a/first.txt', 'a/second.txt']);
      const first = await client.send(new GetObjectCommand({ Bucket: 'torn-bucket', Key: 'a/first.txt' }));
      expect(await first.Body!.transformToString()).toBe('a/first.txt');
      const second = await client.send(new GetObjectCommand({ Bucket: 'torn-bucket', Key: 'a/second.txt' }));
      expect([await second.Body!.transformToString(), second.ContentType]).toEqual(['a/second.txt', 'text/plain']);
      // The ETag s3rver stores: the content's MD5.
      expect(second.ETag).toBe(`"${createHash('md5').update('a/second.txt').digest('hex')}"`);
    } finally {
      client.destroy();
      await s3.close();
    }
    expect(files(dir.path)).toEqual(before);
  } finally {
    dir.remove();
  }
});
