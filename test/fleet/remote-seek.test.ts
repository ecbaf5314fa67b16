import { describe, expect, it } from 'vitest';
import { orderly } from '../helpers/cli.js';
import { waitFor } from '../helpers/wait-for.js';
import { openObjectFleetScene, workerStatus } from '../helpers/fleet.js';

/** Messages of the key the export never had: enough that their replay spans several deliveries. */
const EARLIER = 3000;
const LATER = 5;

/**
 * One worker holds a key's later messages in its open file when the remote subscription is sought back to
 * before the key's earlier ones, which a seek forward had acked before the export saw them. Then the
 * worker stops (finalizing what it holds). Returns `orderly audit`'s answer and each object's payload numbers.
 */
async function seekBackWhileFileOpen(ordered: boolean): Promise<{ code: number; report: Record<string, unknown>; objects: number[][] }> {
  const scene = await openObjectFleetScene('orderly-fleetseek-');
  const { s3, remote } = scene;
  try {
    const bucket = await s3.bucket();
    const admin = remote.client();
    const [topic] = await admin.createTopic('events');
    const [sub] = await topic.createSubscription('events-seek', { enableMessageOrdering: ordered, retainAckedMessages: true });
    const publisher = admin.topic('events', { messageOrdering: true });
    const publish = (from: number, to: number) =>
      Promise.all(
        Array.from({ length: to - from }, (_, i) => publisher.publishMessage({ data: Buffer.from(`k:${from + i}`), orderingKey: 'k' })),
      );
    const beforeAll = new Date(Date.now() - 1000);
    await publish(0, EARLIER);
    const forward = new Date(Date.now() + 1000);
    await sub.seek(forward);
    await new Promise((r) => setTimeout(r, forward.getTime() - Date.now() + 500));
    const job = scene.job({
      exports: [
        {
          subscription: 'events-seek',
          enableMessageOrdering: ordered,
          cloudStorageConfig: { bucket, filenamePrefix: 'events/', maxDuration: '600s', textConfig: {} },
        },
      ],
    });
    const w = scene.worker(job, ['--worker-id', 'w1']);
    await w.ready;
    await publish(EARLIER, EARLIER + LATER);
    await waitFor('the worker to hold the later messages in its open file', async () => (await workerStatus(w)).backlog === LATER, 30_000);
    // Back to before the first message: the replay brings the earlier ones first, then the later again.
    await sub.seek(beforeAll);
    await waitFor(
      'every message of the replay to be written or held',
      async () => {
        const s = await workerStatus(w);
        return s.exported + s.backlog >= EARLIER + 2 * LATER && (await remote.backlog('events-seek')) === s.backlog;
      },
      60_000,
    );
    w.kill('SIGTERM');
    expect((await w.exited).code).toBe(0);
    const audit = await orderly('audit', job, 'events-seek', '--json');
    const objects: number[][] = [];
    for (const name of (await s3.list(bucket)).filter((n) => !n.startsWith('_orderly/'))) {
      objects.push(
        (await s3.get(bucket, name))
          .toString('utf8')
          .trim()
          .split('\n')
          .map((line) => Number(line.split(':')[1])),
      );
    }
    return { code: audit.code, report: JSON.parse(audit.stdout), objects };
  } finally {
    await scene.close();
  }
}

const everyMessageOnce = { messages: EARLIER + LATER, missing: { count: 0 }, duplicates: { count: 0 }, objectErrors: { count: 0 } };

describe('a fleet worker while the remote subscription is sought back', () => {
  it('ordered: the replay of messages the export never had does not follow later ones of their key in the open file', async () => {
    const { code, report, objects } = await seekBackWhileFileOpen(true);
    expect(report).toMatchObject({ ...everyMessageOnce, outOfOrderInFile: { count: 0 } });
    expect(code).toBe(0);
    // By the payloads too: in every object the key goes forward, and each message is there.
    for (const numbers of objects) expect(numbers).toEqual([...numbers].sort((a, b) => a - b));
    expect(new Set(objects.flat()).size).toBe(EARLIER + LATER);
  }, 120_000);

  it('unordered: a key going back inside a file is reported, and the audit does not fail on it', async () => {
    const { code, report } = await seekBackWhileFileOpen(false);
    expect(report).toMatchObject(everyMessageOnce);
    expect((report.outOfOrderInFile as { count: number }).count).toBeGreaterThan(0);
    expect(code).toBe(0);
  }, 120_000);
});
