import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { InvalidArgumentError } from './errors.js';

/** Where push requests may go. */
export interface PushEgress {
  /** Allow link-local and cloud metadata addresses (169.254.0.0/16, fe80::/10, fd00:ec2::254). */
  allowLinkLocal: boolean;
  /** Name resolution (default: the system's, as `dns.lookup`); what it returns is what gets checked. */
  lookup?: typeof dnsLookup;
}

export const DEFAULT_PUSH_EGRESS: PushEgress = { allowLinkLocal: false };

/**
 * Link-local and cloud metadata addresses: a push endpoint there could read the host's cloud
 * credentials. IPv4-mapped, IPv4-compatible and NAT64 forms of 169.254.0.0/16 are included.
 */
const LINK_LOCAL = new BlockList();
LINK_LOCAL.addSubnet('169.254.0.0', 16, 'ipv4');
LINK_LOCAL.addSubnet('fe80::', 10, 'ipv6');
LINK_LOCAL.addAddress('fd00:ec2::254', 'ipv6');
LINK_LOCAL.addSubnet('::a9fe:0', 112, 'ipv6');
LINK_LOCAL.addSubnet('64:ff9b::a9fe:0', 112, 'ipv6');

export function isLinkLocal(address: string): boolean {
  const family = isIP(address);
  return family !== 0 && LINK_LOCAL.check(address, family === 4 ? 'ipv4' : 'ipv6');
}

/**
 * Headers a pushConfig attribute must not set: hop-by-hop and framing headers would corrupt the
 * request, auth headers would let a subscription carry credentials (or a Host header steer them).
 */
const RESERVED_HEADERS = new Set([
  'authorization',
  'proxy-authorization',
  'cookie',
  'host',
  'connection',
  'proxy-connection',
  'keep-alive',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'content-length',
  'content-type',
  'content-encoding',
  'expect',
]);

/**
 * The values of `x-goog-version`, Pub/Sub's one push attribute (the shape of the pushed body), whose format
 * Orderly sends: v1's (v1beta2 names the same). Pub/Sub's other, v1beta1, is not Orderly's, and was taken
 * and then pushed in v1's shape, which an endpoint written for v1beta1 does not read.
 */
const PUSH_FORMAT_VERSIONS = ['v1', 'v1beta2'];

/**
 * Refuses attributes that are not usable as HTTP headers, or that name a reserved one, and an
 * `x-goog-version` asking for a push format Orderly does not send.
 */
export function checkPushAttributes(attributes: Record<string, unknown>): void {
  for (const [name, value] of Object.entries(attributes)) {
    const problem = headerProblem(name, value, RESERVED_HEADERS) ?? pushFormatProblem(name, value as string);
    if (problem) throw new InvalidArgumentError(`pushConfig.attributes["${name.slice(0, 100)}"]`, problem);
  }
}

function pushFormatProblem(name: string, value: string): string | undefined {
  if (name.toLowerCase() !== 'x-goog-version' || PUSH_FORMAT_VERSIONS.includes(value)) return undefined;
  return `must be ${PUSH_FORMAT_VERSIONS.join(' or ')} (the push format Orderly sends), got ${JSON.stringify(value.slice(0, 100))}`;
}

/**
 * Message attributes an unwrapped push (`noWrapper.writeMetadata`) sends as headers: a message may set its
 * Content-Type this way, as Pub/Sub's payload unwrapping allows; the other reserved headers it may not.
 */
const RESERVED_MESSAGE_HEADERS = new Set([...RESERVED_HEADERS].filter((h) => h !== 'content-type'));

/** Why a message attribute cannot be sent as a header of an unwrapped push, if it cannot. */
export function messageHeaderProblem(name: string, value: string): string | undefined {
  const problem = headerProblem(name, value, RESERVED_MESSAGE_HEADERS);
  return (
    problem &&
    `message attribute ${JSON.stringify(name.slice(0, 100))} cannot be sent as an HTTP header (payload unwrapping writes attributes as headers): it ${problem}`
  );
}

function headerProblem(name: string, value: unknown, reserved: Set<string>): string | undefined {
  if (!/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/.test(name)) return 'is not a valid HTTP header name';
  if (reserved.has(name.toLowerCase()) || name.toLowerCase().startsWith('x-goog-pubsub-')) {
    return `would set the ${name} header, which may not be set this way (hop-by-hop, framing, auth and x-goog-pubsub- headers are reserved)`;
  }
  return headerValueProblem(value);
}

/** Why `value` cannot be an HTTP header's value, if it cannot: header values are Latin-1 text without control characters (a tab is allowed). */
export function headerValueProblem(value: unknown): string | undefined {
  if (typeof value !== 'string') return 'must be a string';
  // eslint-disable-next-line no-control-regex -- matching control characters is the point: they are refused in header values
  if (/[\0-\x08\x0a-\x1f\x7f]/.test(value)) return 'must not contain control characters';
  if (/[^\0-\xff]/.test(value)) return 'must not contain characters beyond Latin-1';
  return undefined;
}

/** A refused destination; the delivery fails (and the message is nacked) with this message. */
export class PushEgressRefused extends Error {}

/**
 * POSTs `body` (with `headers`, which name its content-type) to `url` and resolves with the HTTP status (the
 * final one, or an interim 102). Redirects are not followed (a 3xx is the
 * answer); unless allowed, a link-local address is refused, checked on the address actually connected
 * to, after DNS resolution, so a name that resolves there (or later rebinds there) is caught too.
 */
export function post(
  url: string,
  body: string | Buffer,
  headers: Record<string, string>,
  options: { timeoutMs: number; egress: PushEgress; signal?: AbortSignal },
): Promise<number> {
  const target = new URL(url);
  const literal = target.hostname.replace(/^\[|\]$/g, '');
  if (!options.egress.allowLinkLocal && isLinkLocal(literal)) return Promise.reject(refused(literal));
  const resolveName = options.egress.lookup ?? dnsLookup;
  const lookup: LookupFunction = (hostname, lookupOptions, callback) => {
    resolveName(hostname, lookupOptions, (err, address: string | LookupAddress[], family?: number) => {
      if (err || options.egress.allowLinkLocal) return callback(err, address, family);
      const addresses = typeof address === 'string' ? [address] : address.map((a) => a.address);
      const bad = addresses.find(isLinkLocal);
      if (bad) return callback(Object.assign(refused(bad), { code: 'EPUSHREFUSED' }), address, family);
      callback(null, address, family);
    });
  };
  const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
  // One controller for the timeout and the caller's signal: AbortSignal.any over AbortSignal.timeout lets
  // the timeout be garbage collected, and a request to an endpoint that never answers then never ended.
  const controller = new AbortController();
  const cut = () => controller.abort();
  return new Promise((resolve, reject) => {
    // Throws for a header Node refuses (before any timer or listener is set, which nothing would clear).
    const req = send(
      target,
      {
        method: 'POST',
        headers: { ...headers, 'content-length': Buffer.byteLength(body) },
        lookup,
        signal: controller.signal,
      },
      (res: IncomingMessage) => {
        resolve(res.statusCode ?? 0);
        // Only the status matters: the body is drained (so the socket can be reused), errors while at it are moot.
        res.on('error', () => undefined);
        res.resume();
      },
    );
    const timeout = setTimeout(cut, options.timeoutMs);
    if (options.signal?.aborted) cut();
    options.signal?.addEventListener('abort', cut, { once: true });
    // An interim 102 (Processing) is an answer Pub/Sub acks on: what follows it, if anything, changes nothing.
    req.on('information', (info) => {
      if (info.statusCode === 102) resolve(102);
    });
    req.on('error', reject);
    // The exchange is over (answered and drained, or failed): the timeout and the caller's signal let go.
    req.on('close', () => {
      clearTimeout(timeout);
      options.signal?.removeEventListener('abort', cut);
    });
    req.end(body);
  });
}

function refused(address: string): PushEgressRefused {
  return new PushEgressRefused(
    `push endpoint address ${address} is link-local or a cloud metadata address; refused (set push.allowLinkLocal in the job file to allow)`,
  );
}
