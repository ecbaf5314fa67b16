import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import '../../examples/jsonl-file-connector/src/index.js';
import type { ManualClock } from '../../src/core/clock.js';
import type { OrderlyError } from '../../src/core/errors.js';
import type { PubSubCore } from '../../src/core/pubsub-core.js';
import type { SubscriptionEvent } from '../../src/core/subscription-events.js';
import { statusOf } from '../../src/job/metrics.js';
import { openCore, settle } from '../helpers/core.js';
import { tempDir } from '../helpers/temp-dir.js';
import { openExport } from '../helpers/export.js';
import { waitFor } from '../helpers/wait-for.js';

let dir: ReturnType<typeof tempDir>;
let core: PubSubCore;
let clock: ManualClock;

beforeEach(async () => {
  dir = tempDir();
  ({ core, clock } = await openCore(dir.path));
  await core.createTopic('orders');
});
afterEach(async () => {
  await core.close();
  dir.remove();
});

const DETACHED = { code: 'FAILED_PRECONDITION', message: expect.stringContaining('is detached from its topic') };

describe('DetachSubscription', () => {
  it('keeps the subscription with detached: true, drops its backlog, and pull, attach, seek and snapshots fail with FAILED_PRECONDITION', async () => {
    await core.createSubscription('gone', { topic: 'orders', enableMessageOrdering: true });
    await core.createSubscription('stays', { topic: 'orders' });
    await core.publish('orders', [{ data: 'm1', orderingKey: 'k' }]);
    const events: SubscriptionEvent[] = [];
    core.onSubscriptionChange((e) => events.push(e));
    // a consumer attached at the time is told why it ends
    let reason: OrderlyError | undefined;
    const handle = core.attach('gone', {
      room: () => ({ messages: 0, bytes: 0 }),
      deliver: () => undefined,
      detached: (r) => (reason = r),
    });

    await core.detachSubscription('projects/p/subscriptions/gone');
    expect(events).toEqual([{ type: 'updated', subscription: 'projects/p/subscriptions/gone' }]);
    expect(reason).toMatchObject(DETACHED);
    expect(handle.attached).toBe(false);
    expect(core.getSubscription('gone')).toMatchObject({ detached: true, topic: 'projects/p/topics/orders', enableMessageOrdering: true });
    expect(core.listSubscriptions().map((s) => [s.name, s.detached])).toEqual([
      ['projects/p/subscriptions/gone', true],
      ['projects/p/subscriptions/stays', false],
    ]);
    // `orderly status` and /status say so (their state alone read ACTIVE).
    expect(statusOf(core).map((s) => [s.subscription, s.detached])).toEqual([
      ['projects/p/subscriptions/gone', true],
      ['projects/p/subscriptions/stays', false],
    ]);
    await expect(core.pull('gone')).rejects.toMatchObject(DETACHED);
    expect(() => core.attach('gone', { room: () => ({ messages: 1, bytes: 1 }), deliver: () => undefined })).toThrow(
      expect.objectContaining(DETACHED),
    );
    expect(() => core.subscribe('gone', () => undefined)).toThrow(expect.objectContaining(DETACHED));
    await expect(core.seek('gone', clock.now())).rejects.toMatchObject(DETACHED);
    await expect(core.createSnapshot('of-gone', { subscription: 'gone' })).rejects.toMatchObject(DETACHED);
    expect(core.metrics('gone').backlogMessages).toBe(0);
    // detaching again changes nothing; acks of what it handed out are stale and ignored
    await core.detachSubscription('gone');
    await core.acknowledge('gone', ['stale']);
    expect(events).toHaveLength(1);

    // the other subscription is untouched; new messages reach only it
    await core.publish('orders', [{ data: 'm2', orderingKey: 'k' }]);
    const got = await core.pull('stays', { maxMessages: 10 });
    expect(got.map((m) => m.message.data.toString())).toEqual(['m1', 'm2']);
    await core.acknowledge(
      'stays',
      got.map((m) => m.ackId),
    );
    await settle(core);
    await core.close();
    ({ core } = await openCore(dir.path, clock));
    expect(core.getSubscription('gone').detached).toBe(true);
    await expect(core.pull('gone')).rejects.toMatchObject(DETACHED);
    // its backlog is gone for good: nothing of the topic is kept for it (once the other subscription has read its own)
    await settle(core);
    expect((await core.compact()).deletedMessages).toBe(2);
    // it can still be deleted, and its name used again for a live subscription
    await core.deleteSubscription('gone');
    await core.createSubscription('gone', { topic: 'orders' });
    expect(core.getSubscription('gone').detached).toBe(false);
  });

  it('a detached subscription keeps no messages for seek (retainAckedMessages), stops pushing, and can still be updated', async () => {
    const pushed: string[] = [];
    const server = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        pushed.push(Buffer.from(JSON.parse(body).message.data, 'base64').toString());
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const pushEndpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}/push`;
      await core.createSubscription('replay', { topic: 'orders', retainAckedMessages: true, pushConfig: { pushEndpoint } });
      await core.createSubscription('witness', { topic: 'orders' });
      await core.publish('orders', [{ data: 'm1' }]);
      await waitFor('the push', () => pushed.length === 1);
      await core.detachSubscription('replay');
      await core.publish('orders', [{ data: 'm2' }]);
      const witnessed = await core.pull('witness', { maxMessages: 10, waitMs: 5_000 });
      await core.acknowledge(
        'witness',
        witnessed.map((m) => m.ackId),
      );
      await settle(core);
      expect(pushed).toEqual(['m1']);
      // nothing is retained for the detached subscription's seek
      expect((await core.compact()).deletedMessages).toBe(2);
      await core.updateSubscription('replay', { labels: { still: 'updatable' } });
      expect(core.getSubscription('replay')).toMatchObject({
        detached: true,
        labels: { still: 'updatable' },
        pushConfig: { pushEndpoint },
      });
      await core.publish('orders', [{ data: 'm3' }]);
      await core.pull('witness', { maxMessages: 10, waitMs: 5_000 });
      await settle(core);
      expect(pushed).toEqual(['m1']);
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});

describe('DetachSubscription of an export subscription', () => {
  it("stops its runner (the export manager follows the core's update event), also after a restart", async () => {
    const exportDir = tempDir();
    let env = await openExport(exportDir.path);
    try {
      const path = join(exportDir.path, 'out.jsonl');
      await env.core.createTopic('events');
      await env.core.createSubscription('to-file', { topic: 'events', exportConfig: { connector: 'jsonl-file', path } });
      await waitFor('the runner started', () => env.exports.runner('to-file') !== undefined);
      await env.core.publish('events', [{ data: 'before' }]);
      await waitFor('the file exported', () => env.core.metrics('to-file').backlogMessages === 0 && existsSync(path));
      await env.core.detachSubscription('to-file');
      await waitFor('the runner stopped', () => env.exports.runner('to-file') === undefined);
      await env.core.publish('events', [{ data: 'after' }]);
      await env.close();
      env = await openExport(exportDir.path);
      await env.exports.sync();
      expect(env.exports.runner('to-file')).toBeUndefined();
      expect(env.core.getSubscription('to-file')).toMatchObject({ detached: true, state: 'ACTIVE' });
      expect(readFileSync(path, 'utf8')).not.toContain('after');
    } finally {
      await env.close();
      exportDir.remove();
    }
  });
});
