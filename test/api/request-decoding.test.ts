import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MESSAGE_SHAPE, pubsubRoot } from '../../src/api/pubsub-proto.js';
import { requestDecoder } from '../../src/api/request-decoding.js';

const type = pubsubRoot().lookupType('google.pubsub.v1.StreamingPullRequest');
const decode = requestDecoder('/google.pubsub.v1.Subscriber/StreamingPull');
const encode = (request: Record<string, unknown>) => Buffer.from(type.encode(type.fromObject(request)).finish());

describe('request decoding (strings)', () => {
  it('reads ASCII, multi-byte and long strings as protobufjs does', () => {
    // ASCII, any other character, and ids longer than a short-string fast path would take.
    const id = fc.oneof(fc.string({ maxLength: 80 }), fc.string({ unit: 'binary', maxLength: 80 }));
    fc.assert(
      fc.property(fc.array(id, { maxLength: 10 }), id, (ackIds, subscription) => {
        const bytes = encode({ subscription, ackIds });
        expect(decode(bytes)).toEqual(type.toObject(type.decode(bytes), MESSAGE_SHAPE));
      }),
      { numRuns: 300 },
    );
  });

  it('refuses a string that is not UTF-8, wherever its first byte above 0x7f is', () => {
    for (const bad of [[0xff], [0x61, 0x62, 0xc3], [0x61, 0xed, 0xa0, 0x80]]) {
      // StreamingPullRequest.ack_ids (field 2): a valid id, then the bad one.
      const field = (b: number[]) => Buffer.from([0x12, b.length, ...b]);
      const bytes = Buffer.concat([field([0x61, 0x2d, 0x31]), field(bad)]);
      expect(() => decode(bytes)).toThrow('not valid UTF-8');
    }
  });
});
