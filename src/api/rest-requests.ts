import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * The REST requests being answered, so a stopping endpoint can let them finish instead of cutting their
 * connections: a publish cut after it was stored went unanswered, and its client published it again. A
 * request that arrives once the stop began (on a connection kept alive) is answered 503 UNAVAILABLE,
 * which Google's clients retry (on another server, or this one restarted).
 */
export class RestRequests {
  private readonly open = new Set<ServerResponse>();
  private stopping = false;
  private drained?: () => void;

  constructor(private readonly handler: (req: IncomingMessage, res: ServerResponse) => void) {}

  readonly handle = (req: IncomingMessage, res: ServerResponse): void => {
    if (this.stopping) return void unavailable(res);
    this.open.add(res);
    res.once('close', () => {
      this.open.delete(res);
      if (this.open.size === 0) this.drained?.();
    });
    this.handler(req, res);
  };

  /** Refuses new requests; resolves once every request in flight has been answered (or its client went away). */
  stop(): Promise<void> {
    this.stopping = true;
    if (this.open.size === 0) return Promise.resolve();
    return new Promise((resolve) => (this.drained = resolve));
  }
}

function unavailable(res: ServerResponse): void {
  const body = JSON.stringify({ error: { code: 503, message: 'the server is shutting down', status: 'UNAVAILABLE' } });
  res.writeHead(503, { 'content-type': 'application/json', connection: 'close' }).end(body);
}
