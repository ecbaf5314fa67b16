import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { orderly } from '../../test/helpers/cli.js';
import { tempDirPerTest } from '../../test/helpers/temp-dir-per-test.js';
import { s3Connection } from './s3-client.js';

const dir = tempDirPerTest();
const PASSWORD = 'SuperSecretPass123';

function jobWithEndpoint(endpoint: string): string {
  const file = join(dir.path, 'job.yaml');
  writeFileSync(
    file,
    `dataDir: ${JSON.stringify(join(dir.path, 'data'))}\n` +
      `objectStorage: { endpoint: ${JSON.stringify(endpoint)} }\n` +
      'topics: [{ name: orders }]\n' +
      'subscriptions: [{ name: orders-files, topic: orders, cloudStorageConfig: { bucket: exports } }]\n',
  );
  return file;
}

it.each([
  // Not a URL: the SDK quoted it whole in the export's error, so status, /status and the log showed the password.
  [`minioadmin:${PASSWORD}@minio:9000`, 'must be an http:// or https:// URL'],
  // A URL whose credentials the SDK ignores.
  [`http://minioadmin:${PASSWORD}@127.0.0.1:9000`, 'must not carry credentials'],
])('objectStorage.endpoint %s is refused by orderly validate, without quoting it', async (endpoint, problem) => {
  const r = await orderly('validate', jobWithEndpoint(endpoint));
  expect(r.code, r.stdout).toBe(2);
  expect(r.stderr).toContain(`objectStorage.endpoint: ${problem}`);
  expect(r.stdout + r.stderr).not.toContain(PASSWORD);
});

it('an S3_ENDPOINT that is not an http(s) URL is refused naming the variable, without quoting it', () => {
  const connect = () => s3Connection(undefined, { S3_ENDPOINT: `minioadmin:${PASSWORD}@minio:9000` });
  expect(connect).toThrow(/^S3_ENDPOINT: must be an http:\/\/ or https:\/\/ URL/);
  expect(connect).not.toThrow(PASSWORD);
  expect(s3Connection(undefined, { S3_ENDPOINT: 'http://127.0.0.1:9000' }).endpoint).toBe('http://127.0.0.1:9000');
});
