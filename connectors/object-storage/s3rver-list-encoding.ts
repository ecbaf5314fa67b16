import type S3rver from 's3rver';

/** A listing as s3rver builds it, before it becomes XML. */
interface ListBucketResult {
  Prefix?: string;
  Delimiter?: string;
  StartAfter?: string;
  Marker?: string;
  NextMarker?: string;
  Contents?: { Key: string }[];
  CommonPrefixes?: { Prefix: string }[];
  EncodingType?: string;
}

/** As S3 encodes names for encoding-type=url: "/" kept, so listings stay readable; "+" and "%" escaped. */
function encodeName(name: string): string {
  return encodeURIComponent(name).replace(/%2F/g, '/');
}

/**
 * Makes s3rver (3.7) honour `encoding-type=url` on bucket listings, as S3 does. The `minio` client, mc and
 * the AWS CLI ask for it and URL-decode every name they get back; s3rver ignored it and sent names raw, so
 * a "+" (in every object name of Pub/Sub's default datetime format, `+00:00`) was listed as a space, which
 * no GET finds, and a "%" failed the whole listing. Orderly's own S3 client does not ask for the encoding.
 * Runs between s3rver's XML encoder and its routes (Koa's middleware list is composed at `run()`); the
 * continuation token stays as s3rver made it (it is opaque to clients).
 */
export function encodeListingsOnRequest(server: S3rver): void {
  const middleware = (server as unknown as { middleware: ((ctx: unknown, next: () => Promise<void>) => Promise<void>)[] }).middleware;
  // s3rver's own: the request logger, then the XML encoder, which must see what this returns.
  middleware.splice(2, 0, async (ctx, next) => {
    await next();
    const { query, body } = ctx as { query: Record<string, string | undefined>; body: unknown };
    if (query['encoding-type'] !== 'url') return;
    const list = (body as { ListBucketResult?: ListBucketResult } | undefined)?.ListBucketResult;
    if (!list) return;
    for (const field of ['Prefix', 'Delimiter', 'StartAfter', 'Marker', 'NextMarker'] as const) {
      if (list[field]) list[field] = encodeName(list[field]);
    }
    for (const object of list.Contents ?? []) object.Key = encodeName(object.Key);
    for (const common of list.CommonPrefixes ?? []) common.Prefix = encodeName(common.Prefix);
    list.EncodingType = 'url';
  });
}
