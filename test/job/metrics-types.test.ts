import { join } from 'node:path';
import { afterEach, expect, it, vi } from 'vitest';
import { ExportManager } from '../../src/connector/export-manager.js';
import { PubSubCore } from '../../src/core/pubsub-core.js';
import { serveMetrics } from '../../src/job/metrics.js';
import { createLogger } from '../../src/log.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { tempDir } from '../helpers/temp-dir.js';

const dir = tempDir('orderly-metrics-types-');
afterEach(() => dir.remove());

/** A core with its exports and its metrics server on 127.0.0.1, for the length of `run`. */
async function served(
  run: (served: { core: PubSubCore; exports: ExportManager; url: string }) => Promise<void>,
  options: { projectId?: string } = {},
): Promise<void> {
  const core = await PubSubCore.open({ store: SqliteStore.open(join(dir.path, 'store')), ...options });
  const exports = new ExportManager({ core, settings: { dataDir: dir.path }, logger: createLogger({ level: 'silent' }) });
  const metrics = await serveMetrics(core, exports, '127.0.0.1', 0);
  try {
    await run({ core, exports, url: metrics.url });
  } finally {
    await metrics.close();
    await exports.stop();
    await core.close();
  }
}

/** `# TYPE name kind` of every metric on the page. */
function types(text: string): Map<string, string> {
  return new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
}

it('serves running totals as Prometheus counters and levels as gauges, with their live values', async () => {
  await served(async ({ core, url }) => {
    await core.createTopic('events');
    await core.createSubscription('reader', { topic: 'events' });
    await core.publish('events', [{ data: Buffer.from('a') }, { data: Buffer.from('b') }, { data: Buffer.from('c') }]);
    const pulled = await core.pull('reader', { maxMessages: 2 });
    await core.acknowledge(
      'reader',
      pulled.map((m) => m.ackId),
    );

    const text = await (await fetch(`${url}/metrics`)).text();
    const kinds = types(text);
    const totals = [...kinds.keys()].filter((name) => name.endsWith('_total'));
    expect(totals).toEqual(
      expect.arrayContaining(['orderly_published_total', 'orderly_acked_total', 'orderly_delivered_total', 'orderly_exported_total']),
    );
    for (const name of totals) expect([name, kinds.get(name)]).toEqual([name, 'counter']);
    for (const name of [
      'orderly_backlog_messages',
      'orderly_resident_payload_bytes',
      'orderly_subscription_state',
      'orderly_payload_memory_limit_bytes',
    ])
      expect([name, kinds.get(name)]).toEqual([name, 'gauge']);
    expect(text).toContain('orderly_published_total{topic="events"} 3');
    expect(text).toContain('orderly_delivered_total{subscription="reader"} 2');
    expect(text).toContain('orderly_acked_total{subscription="reader"} 2');
    expect(text).toContain('orderly_backlog_messages{subscription="reader"} 1');
    expect(text).toMatch(/^orderly_unexpected_errors_total \d+$/m);
    expect(text).toMatch(/^orderly_payload_memory_limit_bytes [1-9]\d*$/m);
    expect(text).toContain('orderly_subscription_state{subscription="reader",state="ACTIVE"} 1');
    expect(text).toContain('orderly_subscription_state{subscription="reader",state="NOT_FOUND"} 0');
  });
});

it("labels another project's topic by its full name, so topics with the same id are not added together", async () => {
  await served(
    async ({ core, url }) => {
      await core.createTopic('events');
      await core.createTopic('projects/other/topics/events');
      await core.publish('events', [{ data: Buffer.from('a') }]);
      await core.publish('projects/other/topics/events', [{ data: Buffer.from('b') }, { data: Buffer.from('c') }]);

      const text = await (await fetch(`${url}/metrics`)).text();
      expect(text).toContain('orderly_published_total{topic="events"} 1\n');
      expect(text).toContain('orderly_published_total{topic="projects/other/topics/events"} 2\n');
    },
    { projectId: 'p' },
  );
});

it('answers /status with a 500 naming the error when reading the state fails (it had sent the 200 header first, then hung)', async () => {
  await served(async ({ exports, url }) => {
    try {
      vi.spyOn(exports, 'remoteExports').mockImplementation(() => {
        throw new Error('state unreadable');
      });
      for (const path of ['/status', '/metrics']) {
        const res = await fetch(`${url}${path}`, { signal: AbortSignal.timeout(5_000) });
        expect([path, res.status, await res.text()]).toEqual([path, 500, 'reading the state failed: state unreadable\n']);
      }
    } finally {
      vi.restoreAllMocks();
    }
  });
});

it('serves /metrics and /status whatever query string a scraper adds (a scrape config with params got 404)', async () => {
  await served(async ({ url }) => {
    const metricsPage = await fetch(`${url}/metrics?format=prometheus`);
    expect([metricsPage.status, await metricsPage.text()]).toEqual([
      200,
      expect.stringContaining('# TYPE orderly_published_total counter'),
    ]);
    const statusPage = await fetch(`${url}/status?pretty`);
    expect([statusPage.status, await statusPage.json()]).toEqual([200, []]);
    expect((await fetch(`${url}/metricsx`)).status).toBe(404);
  });
});

it('drops a deleted topic from orderly_published_total: topics created and deleted do not pile up series', async () => {
  await served(async ({ core, url }) => {
    for (const topic of ['kept', 'gone-1', 'gone-2']) {
      await core.createTopic(topic);
      await core.publish(topic, [{ data: Buffer.from('a') }]);
    }
    await core.deleteTopic('gone-1');
    await core.deleteTopic('gone-2');
    // Created again under a deleted name, it counts from zero.
    await core.createTopic('gone-2');

    const text = await (await fetch(`${url}/metrics`)).text();
    const series = text.split('\n').filter((line) => line.startsWith('orderly_published_total{'));
    expect(series).toEqual(['orderly_published_total{topic="kept"} 1']);
  });
});

it('shows what a snapshot keeps after its subscription drained (messages, bytes, expiry), and what a subscription retains acked', async () => {
  await served(async ({ core, url }) => {
    await core.createTopic('events');
    await core.createSubscription('reader', { topic: 'events' });
    await core.createSubscription('keeper', { topic: 'events', retainAckedMessages: true, messageRetentionDuration: '1d' });
    await core.publish('events', [{ data: Buffer.alloc(100) }, { data: Buffer.alloc(200) }]);
    const snap = await core.createSnapshot('before-drain', { subscription: 'reader' });
    // Published after it: kept too (a seek to it delivers them).
    await core.publish('events', [{ data: Buffer.alloc(300) }]);
    for (const sub of ['reader', 'keeper']) {
      const pulled = await core.pull(sub, { maxMessages: 10 });
      await core.acknowledge(
        sub,
        pulled.map((m) => m.ackId),
      );
    }
    const text = await (await fetch(`${url}/metrics`)).text();
    // Before, a drained subscription's backlog of 0 was all there was to see.
    expect(text).toContain('orderly_backlog_messages{subscription="reader"} 0');
    expect(text).toContain('orderly_snapshot_held_messages{snapshot="before-drain",topic="events"} 3');
    expect(text).toContain('orderly_snapshot_held_bytes{snapshot="before-drain",topic="events"} 600');
    expect(text).toContain(`orderly_snapshot_expire_timestamp_seconds{snapshot="before-drain",topic="events"} ${snap.expireTime / 1000}`);
    expect(text).toContain('orderly_keeps_acked_seconds{subscription="keeper"} 86400');
    expect(text).toContain('orderly_keeps_acked_seconds{subscription="reader"} 0');
    for (const name of ['orderly_snapshot_held_messages', 'orderly_snapshot_held_bytes', 'orderly_snapshot_expire_timestamp_seconds'])
      expect([name, types(text).get(name)]).toEqual([name, 'gauge']);

    const status = (await (await fetch(`${url}/status`)).json()) as Record<string, unknown>[];
    expect(status.find((r) => r.snapshot)).toEqual({
      snapshot: 'projects/orderly/snapshots/before-drain',
      topic: 'projects/orderly/topics/events',
      expireTime: new Date(snap.expireTime).toISOString(),
      heldMessages: 3,
      heldBytes: 600,
      counting: false,
    });
    expect(status.find((r) => r.subscription === 'projects/orderly/subscriptions/keeper')).toMatchObject({ keepsAckedSeconds: 86400 });
    // Gone with the snapshot.
    await core.deleteSnapshot('before-drain');
    expect(await (await fetch(`${url}/metrics`)).text()).not.toContain('orderly_snapshot_held_messages{');
  });
});
