import { PubSub, type ClientConfig } from '@google-cloud/pubsub';
import { SourceError } from './source.js';

/** Google Cloud Pub/Sub's own endpoint, used when the job names none. */
export const GOOGLE_PUBSUB_ENDPOINT = 'pubsub.googleapis.com:443';

/** How to reach a remote Pub/Sub v1 endpoint. */
export interface RemoteEndpoint {
  /**
   * `host:port` of a compatible endpoint (another `orderly serve`, Google's emulator), reached as
   * PUBSUB_EMULATOR_HOST is: plaintext, no Google credentials. Unset: Google Cloud Pub/Sub, over TLS with
   * Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud's login, or the metadata server).
   */
  endpoint?: string;
  /** The project whose subscriptions bare ids name. */
  projectId: string;
  /** Bearer token for an `orderly serve` started with one (sent as `authorization: Bearer <token>`). */
  authToken?: string;
}

/** The endpoint as status and errors name it (never with credentials). */
export function endpointLabel(e: RemoteEndpoint): string {
  return e.endpoint ?? GOOGLE_PUBSUB_ENDPOINT;
}

/** The longest a lease extension (ModifyAckDeadline) is retried: well under the 10 s minimum ack deadline. */
export const LEASE_EXTENSION_RETRY_MS = 4_000;

/**
 * Google's client retries a failing ModifyAckDeadline for up to 600 s and schedules its next lease extension
 * at 0.9 × the ack deadline minus the 99th percentile of modAck latency. With the endpoint unreachable for
 * minutes that latency outgrew the deadline, the delay went negative, and the client extended every held
 * message again on each turn of the loop: a fleet worker cut off from its endpoint (its sink down too) ran at
 * 100% CPU and grew to 2.7 GB in 7 minutes of retry chains. A modAck retried past the lease it extends is of no
 * use anyway (the next extension sends it again); acks keep Google's retries.
 */
const LEASE_EXTENSION_RETRY = {
  interfaces: {
    'google.pubsub.v1.Subscriber': {
      retry_codes: { lease_extension: ['UNAVAILABLE'] },
      retry_params: {
        lease_extension: {
          initial_retry_delay_millis: 100,
          retry_delay_multiplier: 1.3,
          max_retry_delay_millis: 1_000,
          initial_rpc_timeout_millis: LEASE_EXTENSION_RETRY_MS,
          rpc_timeout_multiplier: 1,
          max_rpc_timeout_millis: LEASE_EXTENSION_RETRY_MS,
          total_timeout_millis: LEASE_EXTENSION_RETRY_MS,
        },
      },
      methods: {
        ModifyAckDeadline: {
          timeout_millis: LEASE_EXTENSION_RETRY_MS,
          retry_codes_name: 'lease_extension',
          retry_params_name: 'lease_extension',
        },
      },
    },
  },
};

/** Google's client for the endpoint. Credentials are the client's business: read by it, never logged here. */
export function createPubSubClient(e: RemoteEndpoint): PubSub {
  const options: ClientConfig & Record<string, unknown> = { projectId: e.projectId, clientConfig: LEASE_EXTENSION_RETRY };
  if (e.endpoint) {
    options.apiEndpoint = e.endpoint;
    // Not a *.googleapis.com host: plaintext, as with PUBSUB_EMULATOR_HOST.
    options.emulatorMode = true;
  }
  if (e.authToken) {
    const authorization = `Bearer ${e.authToken}`;
    // grpc-js lets a client rewrite each call's metadata; call credentials would need TLS.
    options['grpc.callInvocationTransformer'] = (call: { metadata: { set(key: string, value: string): void } }) => {
      call.metadata.set('authorization', authorization);
      return call;
    };
  }
  return new PubSub(options);
}

const CODES: Record<number, string> = {
  1: 'CANCELLED',
  2: 'UNKNOWN',
  3: 'INVALID_ARGUMENT',
  4: 'DEADLINE_EXCEEDED',
  5: 'NOT_FOUND',
  7: 'PERMISSION_DENIED',
  8: 'RESOURCE_EXHAUSTED',
  9: 'FAILED_PRECONDITION',
  13: 'INTERNAL',
  14: 'UNAVAILABLE',
  16: 'UNAUTHENTICATED',
};

/** A failure to reach or read a remote subscription, as a message naming the subscription and the endpoint and saying what to do. */
export function describeRemoteError(e: unknown, subscription: string, endpoint: RemoteEndpoint): SourceError {
  // Already described (a reopen's read of the subscription failed): as it is, its kind (`refused`) kept.
  if (e instanceof SourceError) return e;
  const err = e as { code?: number; details?: string; message?: string };
  const where = endpointLabel(endpoint);
  const detail = (err.details || err.message || String(e)).split('\n')[0]!;
  const code = typeof err.code === 'number' ? CODES[err.code] : undefined;
  const google = !endpoint.endpoint;
  switch (code) {
    case 'NOT_FOUND':
      return new SourceError(
        `remote subscription ${subscription} does not exist at ${where} (NOT_FOUND: ${detail}); create it, or fix the name in remote.exports`,
      );
    case 'UNAVAILABLE':
    case 'DEADLINE_EXCEEDED':
      return new SourceError(`cannot reach the Pub/Sub endpoint ${where} for subscription ${subscription} (${code}: ${detail})`);
    case 'UNAUTHENTICATED':
      return new SourceError(
        `the Pub/Sub endpoint ${where} refused the credentials for subscription ${subscription} (UNAUTHENTICATED: ${detail}); ` +
          (google ? 'check GOOGLE_APPLICATION_CREDENTIALS or `gcloud auth application-default login`' : 'check remote.authToken'),
      );
    case 'FAILED_PRECONDITION':
      // What the subscription is, not the network: e.g. it became a push or export subscription after its
      // settings were read (Orderly's own exportConfig does not show in them at all).
      return new SourceError(
        `remote subscription ${subscription} at ${where} cannot be pulled (FAILED_PRECONDITION: ${detail}); an Orderly export reads a pull subscription`,
        'refused',
      );
    case 'PERMISSION_DENIED':
      return new SourceError(
        `the credentials may not read subscription ${subscription} at ${where} (PERMISSION_DENIED: ${detail}); grant roles/pubsub.subscriber (and roles/pubsub.viewer for its settings)`,
      );
  }
  // Google's auth library fails before any call when it finds no usable credentials.
  if (
    google &&
    /credentials|client_email|private_key|Unable to detect a Project Id|invalid_grant|GOOGLE_APPLICATION_CREDENTIALS|no such file/i.test(
      detail,
    )
  ) {
    return new SourceError(
      `no usable Google credentials for subscription ${subscription} at ${where} (${detail}); set GOOGLE_APPLICATION_CREDENTIALS to a service account key file, ` +
        'or run `gcloud auth application-default login`',
    );
  }
  return new SourceError(`reading subscription ${subscription} at ${where} failed (${code ?? 'error'}: ${detail})`);
}
