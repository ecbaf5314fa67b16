import { Agent, request } from 'node:http';
import { afterEach, expect, it } from 'vitest';
import { tempDir } from '../helpers/temp-dir.js';
import { startServe, type ServeProcess } from '../helpers/serve-process.js';

const dir = tempDir('orderly-rest-shutdown-');
const running: ServeProcess[] = [];
afterEach(async () => {
  for (const s of running.splice(0)) await s.stop();
  dir.remove();
});

async function serve(): Promise<ServeProcess> {
  const s = await startServe(['--data-dir', dir.path]);
  running.push(s);
  return s;
}

/** One REST call on `agent`'s kept-alive connections: the status, or the socket error's code. */
function rest(
  server: ServeProcess,
  agent: Agent,
  method: string,
  path: string,
  body: unknown,
): Promise<{ status?: number; body: string; error?: string }> {
  const [host, port] = [server.host.slice(0, server.host.lastIndexOf(':')), server.port];
  return new Promise((resolve) => {
    const req = request({ host, port, method, path, agent, headers: { 'content-type': 'application/json' } }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode, body: text }));
    });
    req.on('error', (e: NodeJS.ErrnoException) => resolve({ body: '', error: e.code }));
    req.end(JSON.stringify(body));
  });
}

it('a stopping server answers the REST publishes in flight (it cut them, stored, unanswered: published again on retry)', async () => {
  const server = await serve();
  const agent = new Agent({ keepAlive: true, maxSockets: 8 });
  const topic = 'projects/p/topics/stop';
  const subscription = 'projects/p/subscriptions/stop';
  expect((await rest(server, agent, 'PUT', `/v1/${topic}`, {})).status).toBe(200);
  expect((await rest(server, agent, 'PUT', `/v1/${subscription}`, { topic })).status).toBe(200);

  const answered = new Set<string>();
  let stopped = false;
  const data = Buffer.alloc(100_000, 1).toString('base64');
  const publisher = async (w: number) => {
    for (let i = 0; !stopped; i++) {
      const tags = Array.from({ length: 10 }, (_, j) => `${w}-${i}-${j}`);
      const r = await rest(server, agent, 'POST', `/v1/${topic}:publish`, { messages: tags.map((tag) => ({ data, attributes: { tag } })) });
      if (r.status === 200) for (const tag of tags) answered.add(tag);
      // 503 once the stop began, or no server; a socket error when a request raced the close of its idle connection.
      else stopped = true;
    }
  };
  const publishers = Array.from({ length: 8 }, (_, w) => publisher(w));
  while (answered.size < 200) await new Promise((r) => setTimeout(r, 20));
  server.child.kill('SIGTERM');
  await Promise.all(publishers);
  agent.destroy();
  await running.pop()!.stop();

  // Started again: exactly the answered messages are there.
  const again = await serve();
  const fresh = new Agent({ keepAlive: true });
  const stored = new Set<string>();
  const pull = async (returnImmediately: boolean) => {
    const r = await rest(again, fresh, 'POST', `/v1/${subscription}:pull`, { maxMessages: 1000, returnImmediately });
    const { receivedMessages = [] } = JSON.parse(r.body) as { receivedMessages?: { message: { attributes: { tag: string } } }[] };
    for (const m of receivedMessages) stored.add(m.message.attributes.tag);
    return receivedMessages.length;
  };
  // A restarted server reads its backlog from the store as it goes: wait for each answered message, then take what else is there.
  while ([...answered].some((tag) => !stored.has(tag))) await pull(false);
  while ((await pull(true)) > 0);
  fresh.destroy();
  // None stored without its answer: a client publishes again what it got no answer for.
  expect([...stored].filter((tag) => !answered.has(tag))).toEqual([]);
  expect(stored.size).toBe(answered.size);
}, 60_000);
