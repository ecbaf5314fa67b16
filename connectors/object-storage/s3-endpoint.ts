/**
 * What is wrong with an S3 endpoint (`objectStorage.endpoint`, S3_ENDPOINT, ...), or undefined when it is
 * an http(s) URL without credentials. The answer never quotes the endpoint: a malformed one was echoed by
 * the SDK into the export's error, its status, /status and the log, with any password written in it.
 */
export function s3EndpointProblem(endpoint: string): string | undefined {
  const url = URL.canParse(endpoint) ? new URL(endpoint) : undefined;
  // Not even the scheme is quoted: in `user:password@host` (no scheme) the user name reads as one.
  if (url?.protocol !== 'http:' && url?.protocol !== 'https:') return 'must be an http:// or https:// URL, e.g. "http://127.0.0.1:9000"';
  // The SDK ignores credentials in the URL: they would be neither used nor kept out of messages.
  if (url.username !== '' || url.password !== '')
    return 'must not carry credentials (user:password@): give them as accessKeyId and secretAccessKey';
  return undefined;
}
