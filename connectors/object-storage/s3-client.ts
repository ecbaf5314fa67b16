import { S3Client, type ServiceInputTypes, type ServiceOutputTypes } from '@aws-sdk/client-s3';
import type { FinalizeRequestMiddleware } from '@smithy/types';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { webcrypto } from 'node:crypto';
import type { SubscriptionState } from '../../src/core/consumer.js';
import { InvalidArgumentError } from '../../src/core/errors.js';
import { s3EndpointProblem } from './s3-endpoint.js';

/** Where and how to reach S3/MinIO: from the job file, else the standard environment variables. */
export interface S3Connection {
  endpoint?: string;
  region: string;
  accessKeyId?: string;
  secretAccessKey?: string;
  forcePathStyle: boolean;
  /** A request that sends and receives nothing this long fails (and is retried): the server is not answering. */
  idleTimeoutSeconds: number;
}

/** objectStorage.idleTimeoutSeconds's default: S3 answers in well under a second, and sends keepalives while it works. */
const DEFAULT_IDLE_TIMEOUT_SECONDS = 30;

export function s3Connection(settings: Record<string, unknown> | undefined, env: NodeJS.ProcessEnv = process.env): S3Connection {
  const s = settings ?? {};
  const str = (v: unknown) => (typeof v === 'string' && v !== '' ? v : undefined);
  const [endpoint, from] = firstSet([
    [str(s.endpoint), 'objectStorage.endpoint'],
    [env.S3_ENDPOINT, 'S3_ENDPOINT'],
    [env.AWS_ENDPOINT_URL_S3, 'AWS_ENDPOINT_URL_S3'],
    [env.AWS_ENDPOINT_URL, 'AWS_ENDPOINT_URL'],
  ]);
  const problem = endpoint === undefined ? undefined : s3EndpointProblem(endpoint);
  if (problem) throw new InvalidArgumentError(from, problem);
  return {
    endpoint,
    region: str(s.region) ?? env.S3_REGION ?? env.AWS_REGION ?? env.AWS_DEFAULT_REGION ?? 'us-east-1',
    accessKeyId: str(s.accessKeyId) ?? env.S3_ACCESS_KEY_ID ?? env.AWS_ACCESS_KEY_ID,
    secretAccessKey: str(s.secretAccessKey) ?? env.S3_SECRET_ACCESS_KEY ?? env.AWS_SECRET_ACCESS_KEY,
    // MinIO and most S3 stand-ins want path-style addressing; AWS itself does not need it.
    forcePathStyle: typeof s.forcePathStyle === 'boolean' ? s.forcePathStyle : endpoint !== undefined,
    idleTimeoutSeconds: typeof s.idleTimeoutSeconds === 'number' ? s.idleTimeoutSeconds : DEFAULT_IDLE_TIMEOUT_SECONDS,
  };
}

/** The first value given, and where it came from (for an error naming the setting). */
function firstSet(candidates: [string | undefined, string][]): [string | undefined, string] {
  return candidates.find(([value]) => value !== undefined) ?? [undefined, candidates[0]![1]];
}

/** SigV4's header naming the payload's SHA-256 (or UNSIGNED-PAYLOAD). */
const PAYLOAD_HASH_HEADER = 'x-amz-content-sha256';

/** The header an upload's own SHA-256 travels in (base64), when the caller computed it (`bodySha256`). */
const SHA256_CHECKSUM_HEADER = 'x-amz-checksum-sha256';

/** Requests whose ChecksumSHA256 is their body's own hash (a CompleteMultipartUpload's is the object's). */
const BODY_HASHED = ['PutObjectCommand', 'UploadPartCommand'];

/**
 * The payload hash an upload is signed with, so that SigV4's signer does not hash the body itself,
 * synchronously on the exporter's thread over every file (with the SDK's CRC32, which a checksum already
 * given also spares: ~5% of a text export's main thread, and a block of several ms per file on the loop):
 * - a PutObject or UploadPart that carries its body's SHA-256 (ChecksumSHA256, from `bodySha256`) is
 *   signed with that hash (those only: there the checksum is the body's; a CompleteMultipartUpload's is
 *   the object's);
 * - over HTTPS, an upload that carries another checksum (the SDK's CRC32, which S3 and
 *   MinIO check against the bytes they received, refusing a mismatch) is signed with UNSIGNED-PAYLOAD: TLS
 *   protects the body in transit, and the checksum (signed, as a header) catches corruption end to end, as
 *   with the SDK's own streaming uploads. Over plain HTTP the signer's SHA-256 stays: a CRC32 is easily
 *   forged, so only the signature keeps a body from being altered on the way.
 */
function signWithKnownPayloadHash(client: S3Client, https: boolean): void {
  const middleware: FinalizeRequestMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => (args) => {
    const { headers } = args.request as { headers?: Record<string, string> };
    if (headers && !(PAYLOAD_HASH_HEADER in headers)) {
      const sha256 = headers[SHA256_CHECKSUM_HEADER];
      if (sha256 !== undefined && BODY_HASHED.includes(context.commandName ?? ''))
        headers[PAYLOAD_HASH_HEADER] = Buffer.from(sha256, 'base64').toString('hex');
      else if (https && Object.keys(headers).some((h) => h.startsWith('x-amz-checksum-')))
        headers[PAYLOAD_HASH_HEADER] = 'UNSIGNED-PAYLOAD';
    }
    return next(args);
  };
  client.middlewareStack.addRelativeTo(middleware, {
    name: 'orderlyKnownPayloadHash',
    relation: 'before',
    toMiddleware: 'httpSigningMiddleware',
  });
}

/**
 * The body's SHA-256 in base64, as PutObject's ChecksumSHA256 takes it. Hashed by WebCrypto on libuv's
 * thread pool, so the event loop only copies the body for it; S3 and MinIO check the object against it.
 */
export async function bodySha256(body: Uint8Array): Promise<string> {
  return Buffer.from(await webcrypto.subtle.digest('SHA-256', body)).toString('base64');
}

export function createS3Client(c: S3Connection): S3Client {
  const client = new S3Client({
    endpoint: c.endpoint,
    region: c.region,
    forcePathStyle: c.forcePathStyle,
    credentials: c.accessKeyId && c.secretAccessKey ? { accessKeyId: c.accessKeyId, secretAccessKey: c.secretAccessKey } : undefined,
    // The SDK retries 5xx, throttling, timeouts and connection resets with backoff.
    maxAttempts: 4,
    // socketTimeout, not requestTimeout: the handler only logs a warning when a request passes requestTimeout
    // (unless throwOnRequestTimeout), and that is a limit on the whole request, which a large part may need.
    // An endpoint that accepted the connection and never answered held an upload, and the export, for good.
    requestHandler: new NodeHttpHandler({ connectionTimeout: 5_000, socketTimeout: c.idleTimeoutSeconds * 1000 }),
  });
  // No endpoint: AWS itself, over HTTPS.
  signWithKnownPayloadHash(client, c.endpoint === undefined || c.endpoint.startsWith('https:'));
  return client;
}

export interface S3Failure {
  /** A sink-wide state (backlog kept, retried with backoff), or undefined for a failure of this object only. */
  state?: Exclude<SubscriptionState, 'ACTIVE'>;
  message: string;
}

/** Missing bucket and denied access are sink states; outages too (RESOURCE_ERROR); other 4xx fail the object. */
export function classifyS3Error(e: unknown, bucket: string): S3Failure {
  const err = e as { name?: string; Code?: string; code?: string; message?: string; $metadata?: { httpStatusCode?: number } };
  const name = err.name ?? err.Code ?? err.code ?? 'Error';
  const status = err.$metadata?.httpStatusCode;
  const detail = `${name}${status ? ` (HTTP ${status})` : ''}: ${err.message ?? String(e)}`;
  if (name === 'NoSuchBucket' || (name === 'NotFound' && status === 404))
    return { state: 'NOT_FOUND', message: `bucket ${bucket} does not exist — ${detail}` };
  if (['AccessDenied', 'InvalidAccessKeyId', 'SignatureDoesNotMatch', 'Forbidden'].includes(name) || status === 403) {
    return { state: 'PERMISSION_DENIED', message: `access to bucket ${bucket} denied — ${detail}` };
  }
  if (status === undefined || status >= 500 || status === 429 || /ECONN|EPIPE|socket|Timeout|network/i.test(detail)) {
    return { state: 'RESOURCE_ERROR', message: `object storage unreachable for bucket ${bucket} — ${detail}` };
  }
  return { message: `upload to bucket ${bucket} refused — ${detail}` };
}
