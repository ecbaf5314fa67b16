import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { OrderlyError } from '../../src/core/errors.js';
import type { MessageInput } from '../../src/core/message.js';
import { publishFile } from '../../src/cli/publish-file.js';
import { tempDirPerTest } from '../helpers/temp-dir-per-test.js';
import { servePerFile } from '../helpers/serve-process.js';

const dir = tempDirPerTest();
const { api } = servePerFile();

describe('orderly publish (publishFile) to a Pub/Sub endpoint', () => {
  /** Publishes `lines` (JSON, keyed by `user`) to a new topic through the endpoint; the requests as sent, and the most in flight at once. */
  async function publishLines(name: string, lines: (string | Buffer)[]) {
    const topic = `projects/publish-file/topics/${name}`;
    const subscription = `projects/publish-file/subscriptions/${name}-sub`;
    await api.pub('createTopic', { name: topic });
    await api.sub('createSubscription', { name: subscription, topic, enableMessageOrdering: true });
    const file = join(dir.path, `${name}.jsonl`);
    writeFileSync(file, Buffer.concat(lines.flatMap((l) => [Buffer.from(l), Buffer.from('\n')])));
    const requests: MessageInput[][] = [];
    let inFlight = 0;
    let mostInFlight = 0;
    const publish = async (messages: MessageInput[]) => {
      requests.push(messages);
      mostInFlight = Math.max(mostInFlight, ++inFlight);
      try {
        const { messageIds } = await api.pub('publish', {
          topic,
          messages: messages.map((m) => ({ data: Buffer.from(m.data as string), orderingKey: m.orderingKey })),
        });
        return messageIds as string[];
      } finally {
        inFlight--;
      }
    };
    const report = await publishFile(publish, { file, orderingKeyField: 'user' });
    return { report, requests, mostInFlight, subscription };
  }
  const line = (n: number, user: string) => JSON.stringify({ n, user });

  it('sends one ordering key per request, as Pub/Sub requires, each key in line order', async () => {
    const { report, requests, subscription } = await publishLines(
      'keyed',
      Array.from({ length: 3000 }, (_, i) => line(i, `u${i % 40}`)),
    );
    expect(report).toEqual({ published: 3000, refused: [] });
    for (const r of requests) expect(new Set(r.map((m) => m.orderingKey)).size).toBe(1);
    // Mixed-key requests had been refused and sent again line by line: 3000 requests; now one per key.
    expect(requests).toHaveLength(40);
    const { receivedMessages } = await api.sub('pull', { subscription, maxMessages: 1000 });
    const byKey = new Map<string, number[]>();
    for (const m of receivedMessages as { message: { data: Buffer; orderingKey: string } }[])
      byKey.set(m.message.orderingKey, [
        ...(byKey.get(m.message.orderingKey) ?? []),
        (JSON.parse(m.message.data.toString()) as { n: number }).n,
      ]);
    for (const ns of byKey.values()) expect(ns).toEqual([...ns].sort((a, b) => a - b));
  });

  it('a hot key goes in requests of 500, in line order; keys of one line each go several requests at once', async () => {
    const hot = await publishLines(
      'hot',
      Array.from({ length: 1200 }, (_, i) => line(i, 'hot')),
    );
    expect(hot.report.published).toBe(1200);
    expect(hot.requests.map((r) => r.length)).toEqual([500, 500, 200]);
    expect(hot.requests.flat().map((m) => (JSON.parse(m.data as string) as { n: number }).n)).toEqual(
      Array.from({ length: 1200 }, (_, i) => i),
    );
    const unique = await publishLines(
      'unique',
      Array.from({ length: 600 }, (_, i) => line(i, `user-${i}`)),
    );
    expect(unique.report.published).toBe(600);
    expect(unique.requests).toHaveLength(600);
    expect(unique.mostInFlight).toBeGreaterThan(1);
  });

  it('a hot key of large lines goes in requests under the 10 MiB limit, not one refused request and then a request per line', async () => {
    const pad = 'x'.repeat(30_000);
    const big = await publishLines(
      'big-lines',
      Array.from({ length: 400 }, (_, i) => JSON.stringify({ n: i, user: 'hot', pad })),
    );
    expect(big.report).toEqual({ published: 400, refused: [] });
    const bytes = (r: MessageInput[]) => r.reduce((sum, m) => sum + Buffer.byteLength(m.data as string) + 3, 0);
    for (const r of big.requests) expect(bytes(r)).toBeLessThanOrEqual(10 * 1024 * 1024);
    expect(big.requests).toHaveLength(2);
    expect(big.requests.flat().map((m) => (JSON.parse(m.data as string) as { n: number }).n)).toEqual(
      Array.from({ length: 400 }, (_, i) => i),
    );
  });

  it('refuses a key JSON cannot carry exactly, and a line that is no object, naming the line', async () => {
    const { report, requests } = await publishLines('numeric-keys', [
      '{"n":1,"user":9007199254740993}',
      '{"n":2,"user":9007199254740992}',
      '{"n":3,"user":1e21}',
      'null',
      '[1]',
      '{"n":6,"user":42}',
    ]);
    // 9007199254740993 and ...992 had both become the key "9007199254740992"; `null` failed with a TypeError.
    expect(report).toEqual({
      published: 1,
      refused: [
        {
          line: 1,
          reason: 'field "user" (the ordering key) is a number JSON cannot carry exactly (9007199254740992); write it as a string',
        },
        {
          line: 2,
          reason: 'field "user" (the ordering key) is a number JSON cannot carry exactly (9007199254740992); write it as a string',
        },
        { line: 3, reason: 'field "user" (the ordering key) is a number JSON cannot carry exactly (1e+21); write it as a string' },
        { line: 4, reason: 'the line is not a JSON object, so it has no field "user"' },
        { line: 5, reason: 'the line is not a JSON object, so it has no field "user"' },
      ],
    });
    expect(requests.flat().map((m) => m.orderingKey)).toEqual(['42']);
  });

  it('says whether a key is missing or of a type it cannot be (a string or an integer is)', async () => {
    const { report, requests } = await publishLines('key-types', [
      '{"n":1}',
      '{"n":2,"user":true}',
      '{"n":3,"user":null}',
      '{"n":4,"user":["u1"]}',
      '{"n":5,"user":7}',
    ]);
    // Each had been "is missing or not a string", though an integer is taken.
    expect(report).toEqual({
      published: 1,
      refused: [
        { line: 1, reason: 'field "user" (the ordering key) is missing' },
        { line: 2, reason: 'field "user" (the ordering key) must be a string or an integer, got a boolean' },
        { line: 3, reason: 'field "user" (the ordering key) must be a string or an integer, got null' },
        { line: 4, reason: 'field "user" (the ordering key) must be a string or an integer, got an array' },
      ],
    });
    expect(requests.flat().map((m) => m.orderingKey)).toEqual(['7']);
  });

  it('a file that starts with a UTF-8 byte order mark (as Windows editors save it) publishes its first line without it', async () => {
    const { report, requests } = await publishLines('bom', ['\uFEFF' + line(1, 'u1'), line(2, 'u1')]);
    // The first line had been refused as "not JSON: Unexpected token '\uFEFF'", a character no terminal shows.
    expect(report).toEqual({ published: 2, refused: [] });
    expect(requests.flat().map((m) => m.data)).toEqual([line(1, 'u1'), line(2, 'u1')]);
  });

  it('a line that is not UTF-8 is refused with its number, not published with U+FFFD in place of its bytes', async () => {
    const utf8 = [line(1, 'u1'), JSON.stringify({ n: 3, user: 'u1', name: 'Zoë \uFFFD 日本' })];
    const { report, subscription } = await publishLines('not-utf8', [
      utf8[0]!,
      Buffer.concat([Buffer.from('{"n":2,"user":"u1","a":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]),
      utf8[1]!,
    ]);
    expect(report).toEqual({ published: 2, refused: [{ line: 2, reason: 'not UTF-8: the line has bytes that are not UTF-8 text' }] });
    const { receivedMessages } = await api.sub('pull', { subscription, maxMessages: 10 });
    expect((receivedMessages as { message: { data: Buffer } }[]).map((m) => m.message.data.toString())).toEqual(utf8);
  });

  it('a message refused (INVALID_ARGUMENT) fails its line; any other failure (the endpoint gone) stops the publishing at once', async () => {
    const file = join(dir.path, 'stops.jsonl');
    writeFileSync(file, Array.from({ length: 5000 }, (_, i) => line(i, `u${i % 10}`)).join('\n') + '\n');
    // Key u0's first 500 lines go first, in one request; line n=10 is refused, so they go again line by line,
    // and the endpoint is gone after three lines got through.
    let requests = 0;
    let accepted = 0;
    const publish = async (messages: MessageInput[]) => {
      requests++;
      if (accepted >= 3) throw new Error("the running job's endpoint 127.0.0.1:9 cannot be reached: connect ECONNREFUSED");
      if (messages.some((m) => (JSON.parse(m.data as string) as { n: number }).n === 10))
        throw new OrderlyError('INVALID_ARGUMENT', 'messages[0]: refused');
      accepted += messages.length;
      return messages.map(() => 'id');
    };
    // Each of 5,000 lines had been refused alike, one request each (197,214 lines of "fetch failed" in a user's run).
    await expect(publishFile(publish, { file, orderingKeyField: 'user' })).rejects.toThrow(
      /^the running job's endpoint 127\.0\.0\.1:9 cannot be reached: connect ECONNREFUSED \(publishing stopped: 3 lines published, 1 refused\)$/,
    );
    expect(requests).toBe(6);
  });

  it('a directory as the file is refused, naming it', async () => {
    await expect(publishFile(() => Promise.resolve([]), { file: dir.path })).rejects.toThrow(
      new OrderlyError('INVALID_ARGUMENT', `--file: ${dir.path} is a directory, not a JSONL file`),
    );
  });

  it("a file that does not exist is a usage error naming --file and the path (exit 2), not Node's ENOENT", async () => {
    const file = join(dir.path, 'missing.jsonl');
    await expect(publishFile(() => Promise.resolve([]), { file })).rejects.toThrow(
      new OrderlyError('INVALID_ARGUMENT', `--file: ${file} does not exist`),
    );
  });

  it('lines of megabytes on many keys go out as they are read, not all held until the end of the file', async () => {
    // Before: a key's batch waited for 9 MiB and all keys' batches for 5,000 lines, so 60 lines of 1 MB on
    // 60 keys were all in memory before the first request (lines of 5 MB so: 820 MiB of RSS, the whole file).
    const topic = 'projects/publish-file/topics/large-lines';
    await api.pub('createTopic', { name: topic });
    const file = join(dir.path, 'large-lines.jsonl');
    const lines = Array.from({ length: 60 }, (_, i) => JSON.stringify({ user: `u${i}`, pad: 'x'.repeat(1_000_000) }));
    writeFileSync(file, lines.join('\n') + '\n');
    // The first request stops the reading: the lines read by then are what the publisher held.
    const stop = new AbortController();
    const publish = async (messages: MessageInput[]) => {
      stop.abort('SIGINT');
      const request = { topic, messages: messages.map((m) => ({ data: Buffer.from(m.data as string), orderingKey: m.orderingKey })) };
      return (await api.pub('publish', request)).messageIds as string[];
    };
    const report = await publishFile(publish, { file, orderingKeyField: 'user', stop: stop.signal });
    expect(report.stopped?.lastLine).toBeLessThanOrEqual(34);
    expect(report.published).toBe(report.stopped?.lastLine);
  });

  it('a stop with requests of several keys in flight starts no request after it, and counts every line that went out', async () => {
    const file = join(dir.path, 'stops-in-flight.jsonl');
    writeFileSync(file, Array.from({ length: 3000 }, (_, i) => line(i, `u${i % 40}`)).join('\n') + '\n');
    // Key u0's request fails first; the 15 others in flight with it succeed a little later.
    let failed = false;
    let startedAfter = 0;
    const publish = async (messages: MessageInput[]) => {
      if (failed) startedAfter++;
      if (messages[0]!.orderingKey === 'u0') {
        await new Promise((resolve) => setTimeout(resolve, 5));
        failed = true;
        throw new Error('the endpoint is gone');
      }
      await new Promise((resolve) => setTimeout(resolve, 30));
      return messages.map(() => 'id');
    };
    const error = await publishFile(publish, { file, orderingKeyField: 'user' }).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    // Each key's 75 lines went in one request: 15 of them were in flight, and went out.
    expect(error?.message).toBe('the endpoint is gone (publishing stopped: 1125 lines published, 0 refused)');
    expect(startedAfter).toBe(0);
  });
});
