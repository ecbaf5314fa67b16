import { createServer, type Socket } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { readStatus } from '../../src/job/status-endpoint.js';

// A process stopped with SIGSTOP: the kernel still accepts the connection, nobody answers.
const sockets = new Set<Socket>();
const silent = createServer((s) => {
  sockets.add(s);
  s.on('error', () => undefined);
});
afterAll(
  () =>
    new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      silent.close(() => resolve());
    }),
);

describe("reading a running process's /status", () => {
  it('gives up on a process that accepts the connection and never answers, saying so', async () => {
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const metrics = `http://127.0.0.1:${(silent.address() as { port: number }).port}`;
    const started = Date.now();
    await expect(readStatus(metrics, undefined, 300)).rejects.toThrow(`${metrics}/status did not answer within 0.3 s`);
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});
