import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { MessageInput } from '../../src/core/message.js';
import { publishFile } from '../../src/cli/publish-file.js';
import { tempDirPerTest } from '../helpers/temp-dir-per-test.js';
import { servePerFile } from '../helpers/serve-process.js';

const dir = tempDirPerTest();
const { api } = servePerFile();

describe('orderly publish (publishFile) to a Pub/Sub endpoint', () => {
  it('sends one ordering key per request, as Pub/Sub requires, each key in line order, in requests of up to 500', async () => {
    const topic = 'projects/publish-file/topics/keyed';
    const subscription = 'projects/publish-file/subscriptions/keyed-sub';
    await api.pub('createTopic', { name: topic });
    await api.sub('createSubscription', { name: subscription, topic, enableMessageOrdering: true });
    const lines = Array.from({ length: 3000 }, (_, i) => JSON.stringify({ n: i, user: `u${i % 40}` }));
    const file = join(dir.path, 'keyed.jsonl');
    writeFileSync(file, lines.join('\n') + '\n');

    const requests: MessageInput[][] = [];
    const publish = async (messages: MessageInput[]) => {
      requests.push(messages);
      const { messageIds } = await api.pub('publish', {
        topic,
        messages: messages.map((m) => ({ data: Buffer.from(m.data as string), orderingKey: m.orderingKey })),
      });
      return messageIds as string[];
    };
    const report = await publishFile(publish, { file, orderingKeyField: 'user' });

    expect(report).toEqual({ published: 3000, refused: [] });
    for (const r of requests) expect(new Set(r.map((m) => m.orderingKey)).size).toBe(1);
    // Mixed-key requests were refused and sent again line by line: 3000 requests; now a few per key.
    expect(requests.length).toBeLessThanOrEqual(40 * 2);
    const { receivedMessages } = await api.sub('pull', { subscription, maxMessages: 1000 });
    const byKey = new Map<string, number[]>();
    for (const m of receivedMessages as { message: { data: Buffer; orderingKey: string } }[])
      byKey.set(m.message.orderingKey, [
        ...(byKey.get(m.message.orderingKey) ?? []),
        (JSON.parse(m.message.data.toString()) as { n: number }).n,
      ]);
    for (const ns of byKey.values()) expect(ns).toEqual([...ns].sort((a, b) => a - b));
  });
});
