import { isUtf8 } from 'node:buffer';
import protobuf from 'protobufjs';
import { MESSAGE_SHAPE, pubsubRoot } from './pubsub-proto.js';
import { checkWireTypes } from './wire-types.js';

/**
 * Strings as proto3 defines them. protobufjs reads invalid UTF-8 as U+FFFD and cuts a string that runs
 * past the message short, so an attribute, ordering key or name would be stored other than it was sent;
 * Google's servers refuse such a request, and so does this reader (the error reaches the caller).
 */
class Utf8Reader extends protobuf.BufferReader {
  override string(): string {
    const length = this.uint32();
    const end = this.pos + length;
    if (end > this.len) throw new RangeError(`a string field of ${length} bytes runs past the end of the message`);
    const bytes = (this.buf as Buffer).subarray(this.pos, end);
    if (!isUtf8(bytes)) throw new Error('a string field is not valid UTF-8');
    this.pos = end;
    return bytes.toString('utf8');
  }
}

/**
 * The request deserializer of a gRPC method (path `/package.Service/Method`): the message in proto-loader's
 * shape (MESSAGE_SHAPE), as proto-loader's own deserializer gives it, with its strings and wire types checked.
 */
export function requestDecoder(path: string): (bytes: Buffer) => unknown {
  const [service, method] = path.slice(1).split('/') as [string, string];
  const type = pubsubRoot().lookupService(service).methods[method]?.resolvedRequestType;
  if (!type) throw new Error(`no request type for ${path}`);
  return (bytes) => {
    checkWireTypes(type, bytes);
    return type.toObject(type.decode(new Utf8Reader(bytes)), MESSAGE_SHAPE);
  };
}
