import { createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SeenRequest {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  /**
   * The status of the answer: the upstream's (also when `intercept` lost it on the way back) or the proxy's
   * own; undefined while in flight or when the upstream was unreachable.
   */
  status?: number;
}

/**
 * What becomes of a request on its way back: `lose` passes it to the target and resets the client's
 * connection instead of answering (the target did the work, the answer never arrived); an answer of the
 * proxy's own is sent instead of reaching the target.
 */
export type Interception = 'lose' | { status: number; body: string };

/**
 * A transparent HTTP proxy on 127.0.0.1 in front of `target` that records every request (S3 requests are
 * signed with the Host header, which it passes on unchanged). While the target is down, a request's
 * connection is reset, as a load balancer in front of a dead S3 does. Requests `holdBack` picks wait in
 * the proxy until `release()` (so a test can stop the target before that step of an upload); those
 * `intercept` picks are lost or answered as it says.
 */
export async function startObservingProxy(
  target: string,
  holdBack: (r: SeenRequest) => boolean = () => false,
  intercept: (r: SeenRequest) => Interception | undefined = () => undefined,
): Promise<{ url: string; seen: SeenRequest[]; release(): void; close(): Promise<void> }> {
  const upstream = new URL(target);
  const seen: SeenRequest[] = [];
  let held: (() => void)[] | undefined = [];
  const server = createServer((req, res) => {
    const entry: SeenRequest = { method: req.method!, url: req.url!, headers: req.headers };
    seen.push(entry);
    if (held && holdBack(entry)) held.push(() => pass(req, res, entry));
    else pass(req, res, entry);
  });
  const pass = (req: IncomingMessage, res: ServerResponse, entry: SeenRequest) => {
    const interception = intercept(entry);
    if (interception !== undefined && interception !== 'lose') {
      req.resume();
      req.on('end', () => {
        entry.status = interception.status;
        res.writeHead(interception.status, { 'content-type': 'application/xml' }).end(interception.body);
      });
      return;
    }
    const forward = request(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers, agent: false },
      (answer) => {
        entry.status = answer.statusCode;
        if (interception === 'lose') {
          answer.resume();
          answer.on('end', () => req.socket.resetAndDestroy());
          return;
        }
        res.writeHead(answer.statusCode!, answer.headers);
        answer.pipe(res);
      },
    );
    forward.on('error', () => req.socket.destroy());
    req.pipe(forward);
  };
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    release() {
      const waiting = held ?? [];
      held = undefined;
      for (const go of waiting) go();
    },
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
