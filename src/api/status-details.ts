import protobuf from 'protobufjs';
import type { ErrorInfo } from '../core/errors.js';

/**
 * google.rpc.Status with a google.rpc.ErrorInfo detail, as Google's APIs attach it to an error: over gRPC
 * in the `grpc-status-details-bin` trailer (google-gax decodes it into `errorInfoMetadata`, which
 * @google-cloud/pubsub reads for exactly-once ack failures), in JSON as `error.details`.
 */
const root = new protobuf.Root();
root
  .define('google.protobuf')
  .add(new protobuf.Type('Any').add(new protobuf.Field('type_url', 1, 'string')).add(new protobuf.Field('value', 2, 'bytes')));
const ErrorInfoType = new protobuf.Type('ErrorInfo')
  .add(new protobuf.Field('reason', 1, 'string'))
  .add(new protobuf.Field('domain', 2, 'string'))
  .add(new protobuf.MapField('metadata', 3, 'string', 'string'));
const Status = new protobuf.Type('Status')
  .add(new protobuf.Field('code', 1, 'int32'))
  .add(new protobuf.Field('message', 2, 'string'))
  .add(new protobuf.Field('details', 3, 'google.protobuf.Any', 'repeated'));
root.define('google.rpc').add(ErrorInfoType).add(Status);
const ERROR_INFO_TYPE = 'type.googleapis.com/google.rpc.ErrorInfo';

/**
 * Bytes of `grpc-status-details-bin` every client takes: gRPC's C core (Python, Ruby, PHP) and Java refuse
 * trailers over 8 KiB in all, in which this travels in base64 beside the message. An exactly-once ack of
 * thousands of expired ids listed them all, and the call hung until its deadline instead of failing
 * (grpc-js dropped the trailer too, past some 70 KB).
 */
export const MAX_STATUS_DETAILS_BIN = 4096;

/**
 * The `grpc-status-details-bin` value for an error with this code, message and ErrorInfo, its metadata cut
 * to the entries that fit MAX_STATUS_DETAILS_BIN. Google's clients (Node, Python) take an ack id the
 * metadata leaves out by the call's status: a failure still, only not told apart as an invalid id.
 */
export function statusDetailsBin(code: number, message: string, info: ErrorInfo): Buffer {
  let entries = Object.entries(info.metadata);
  let bin = encodeStatus(code, message, info);
  while (bin.length > MAX_STATUS_DETAILS_BIN && entries.length > 0) {
    // Each pass keeps the share of entries that would fit, so it shrinks at every step.
    entries = entries.slice(0, Math.floor((entries.length * MAX_STATUS_DETAILS_BIN) / bin.length));
    bin = encodeStatus(code, message, { ...info, metadata: Object.fromEntries(entries) });
  }
  return bin;
}

function encodeStatus(code: number, message: string, info: ErrorInfo): Buffer {
  const value = ErrorInfoType.encode(ErrorInfoType.fromObject(info)).finish();
  const status = Status.fromObject({ code, message, details: [{ type_url: ERROR_INFO_TYPE, value }] });
  return Buffer.from(Status.encode(status).finish());
}

/** The ErrorInfo as an entry of a JSON error's `details` (proto3 JSON of a google.protobuf.Any). */
export function errorInfoJson(info: ErrorInfo): Record<string, unknown> {
  return { '@type': ERROR_INFO_TYPE, reason: info.reason, domain: info.domain, metadata: info.metadata };
}
