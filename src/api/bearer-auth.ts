import * as grpc from '@grpc/grpc-js';
import { createHash, timingSafeEqual } from 'node:crypto';

/**
 * Checks an `Authorization: Bearer <token>` header against the endpoint's token. Both sides are hashed
 * first so the comparison takes the same time whatever the length or content of what was sent.
 */
export function bearerCheck(token: string): (authorization: string | undefined) => boolean {
  const expected = createHash('sha256').update(token).digest();
  return (authorization) => {
    const m = /^Bearer +(\S+) *$/i.exec(authorization ?? '');
    const given = createHash('sha256')
      .update(m?.[1] ?? '')
      .digest();
    // Hash compare first (constant time), then the match itself: an absent header never passes.
    return timingSafeEqual(given, expected) && m !== null;
  };
}

export const UNAUTHENTICATED_MESSAGE =
  'missing or wrong bearer token: send "authorization: Bearer <token>" (the token the endpoint was started with)';

/** Refuses every gRPC call whose `authorization` metadata does not carry the token (UNAUTHENTICATED). */
export function bearerInterceptor(check: (authorization: string | undefined) => boolean): grpc.ServerInterceptor {
  return (_method, call) =>
    new grpc.ServerInterceptingCall(call, {
      start: (next) =>
        next({
          onReceiveMetadata: (metadata, pass) => {
            const [value] = metadata.get('authorization');
            if (check(typeof value === 'string' ? value : undefined)) pass(metadata);
            else call.sendStatus({ code: grpc.status.UNAUTHENTICATED, details: UNAUTHENTICATED_MESSAGE, metadata: new grpc.Metadata() });
          },
        }),
    });
}
