import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import type { PubSubCore } from '../../src/core/pubsub-core.js';
import { openCore, pullAndAck, settle } from '../helpers/core.js';
import { tempDir } from '../helpers/temp-dir.js';

/**
 * Topics' own settings (issue #13): messageRetentionDuration kept and used by compaction and seek,
 * schemaSettings validating publishes and stamping the schema attributes, UpdateTopic changing only what
 * it is given, all durable across a restart.
 */
const AVRO = JSON.stringify({ type: 'record', name: 'Order', fields: [{ name: 'id', type: 'string' }] });

let dir: ReturnType<typeof tempDir>;
let core: PubSubCore;
let clock: ManualClock;

async function open(): Promise<void> {
  ({ core, clock } = await openCore(dir.path, clock ?? new ManualClock()));
}

async function restart(): Promise<void> {
  await core.close();
  ({ core } = await openCore(dir.path, clock));
}

afterEach(async () => {
  await core?.close();
  dir?.remove();
  clock = undefined as unknown as ManualClock;
});

describe('topic messageRetentionDuration', () => {
  it('keeps acked messages within the topic retention: a subscription without retainAckedMessages seeks back', async () => {
    dir = tempDir();
    await open();
    await core.createTopic('kept', { messageRetentionDuration: '1h' });
    await core.createSubscription('kept-sub', { topic: 'kept' });
    await core.publish('kept', [{ data: 'old' }]);
    clock.advance(1_000);
    const mark = clock.now();
    await core.publish('kept', [{ data: 'a' }, { data: 'b' }]);
    expect((await pullAndAck(core, 'kept-sub')).sort()).toEqual(['a', 'b', 'old']);
    await settle(core);
    expect((await core.compact()).deletedMessages).toBe(0);
    await core.seek('kept-sub', mark);
    expect((await pullAndAck(core, 'kept-sub')).sort()).toEqual(['a', 'b']);
    // Past the topic's retention they go, like any acked message (the clock also runs the background compaction).
    clock.advance(3_601_000);
    await settle(core);
    await core.compact();
    await core.seek('kept-sub', mark);
    expect(await pullAndAck(core, 'kept-sub')).toEqual([]);
  });

  it('without a topic retention, compaction drops what every subscription acked (the seek finds nothing)', async () => {
    dir = tempDir();
    await open();
    await core.createTopic('plain');
    await core.createSubscription('plain-sub', { topic: 'plain' });
    const mark = clock.now();
    await core.publish('plain', [{ data: 'a' }]);
    expect(await pullAndAck(core, 'plain-sub')).toEqual(['a']);
    await settle(core);
    expect((await core.compact()).deletedMessages).toBe(1);
    await core.seek('plain-sub', mark);
    expect(await pullAndAck(core, 'plain-sub')).toEqual([]);
  });

  it('is checked (10 minutes to 31 days), returned, shown on subscriptions, kept across restarts, and cleared by null', async () => {
    dir = tempDir();
    await open();
    await expect(core.createTopic('short', { messageRetentionDuration: '5m' })).rejects.toThrow(
      'messageRetentionDuration: must be between 600s and 2678400s, got 300s',
    );
    expect(core.hasTopic('short')).toBe(false);
    await core.createTopic('tee', { messageRetentionDuration: '2h', labels: { team: 'a' } });
    await core.createSubscription('t-sub', { topic: 'tee' });
    expect(core.getSubscription('t-sub').topicMessageRetentionDuration).toBe(7200);
    await restart();
    expect(core.getTopic('tee')).toEqual({
      name: 'projects/p/topics/tee',
      labels: { team: 'a' },
      messageRetentionDuration: 7200,
      state: 'ACTIVE',
    });
    // An update changes exactly what it is given.
    await core.updateTopic('tee', { labels: { team: 'b' } });
    expect(core.getTopic('tee').messageRetentionDuration).toBe(7200);
    await core.updateTopic('tee', { messageRetentionDuration: null });
    expect(core.getTopic('tee')).toEqual({ name: 'projects/p/topics/tee', labels: { team: 'b' }, state: 'ACTIVE' });
    expect(core.getSubscription('t-sub').topicMessageRetentionDuration).toBeUndefined();
  });
});

describe('topic schemaSettings', () => {
  it('validates every message of a publish before storing any; stamps the schema attributes, which survive a restart', async () => {
    dir = tempDir();
    await open();
    const schema = await core.schemas.create({ parent: 'projects/p', schemaId: 'order', schema: { type: 'AVRO', definition: AVRO } });
    await core.createTopic('orders', { schemaSettings: { schema: schema.name, encoding: 'JSON' } });
    await core.createSubscription('orders-sub', { topic: 'orders' });
    await expect(core.publish('orders', [{ data: '{"id": "1"}' }, { data: '{"id": 2}' }])).rejects.toThrow(
      /^messages\[1\]\.data: does not match the schema at \.id/,
    );
    await core.publish('orders', [{ data: '{"id": "3"}', attributes: { mine: 'x' } }]);
    await restart();
    expect(core.getTopic('orders').schemaSettings).toEqual({ schema: 'projects/p/schemas/order', encoding: 'JSON' });
    const [m] = await core.pull('orders-sub', { maxMessages: 10 });
    expect(m!.message.data.toString()).toBe('{"id": "3"}');
    expect(m!.message.attributes).toEqual({
      mine: 'x',
      googclient_schemaname: 'projects/p/schemas/order',
      googclient_schemarevisionid: schema.revisionId,
      googclient_schemaencoding: 'JSON',
    });
  });

  it('deleting the schema points the topic at _deleted-schema_ (durably); publishing is then NOT_FOUND', async () => {
    dir = tempDir();
    await open();
    await core.schemas.create({ parent: 'projects/p', schemaId: 'gone', schema: { type: 'AVRO', definition: AVRO } });
    await core.createTopic('tee', { schemaSettings: { schema: 'projects/p/schemas/gone', encoding: 'BINARY' } });
    await core.schemas.delete('projects/p/schemas/gone');
    await restart();
    expect(core.schemas.has('projects/p/schemas/gone')).toBe(false);
    expect(core.getTopic('tee').schemaSettings).toEqual({ schema: '_deleted-schema_', encoding: 'BINARY' });
    await expect(core.publish('tee', [{ data: 'x' }])).rejects.toMatchObject({ code: 'NOT_FOUND' });
    // New settings make it publishable again.
    await core.updateTopic('tee', { schemaSettings: null });
    await core.publish('tee', [{ data: 'x' }]);
  });

  it('refuses a missing schema, an unspecified encoding, and useTopicSchema on a topic without a schema', async () => {
    dir = tempDir();
    await open();
    await expect(
      core.createTopic('tee', { schemaSettings: { schema: 'projects/p/schemas/none', encoding: 'JSON' } }),
    ).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await core.schemas.create({ parent: 'projects/p', schemaId: 'order', schema: { type: 'AVRO', definition: AVRO } });
    await expect(
      core.createTopic('tee', { schemaSettings: { schema: 'projects/p/schemas/order', encoding: 'ENCODING_UNSPECIFIED' } }),
    ).rejects.toThrow('schemaSettings.encoding: must be JSON or BINARY, got "ENCODING_UNSPECIFIED"');
    await core.createTopic('plain');
    await expect(
      core.createSubscription('sss', { topic: 'plain', bigqueryConfig: { table: 'p.d.t', useTopicSchema: true } }),
    ).rejects.toThrow('bigqueryConfig.useTopicSchema: topic projects/p/topics/plain has no schema (schemaSettings)');
    await expect(
      core.createSubscription('sss', { topic: 'plain', cloudStorageConfig: { bucket: 'b', avroConfig: { useTopicSchema: true } } }),
    ).rejects.toThrow('cloudStorageConfig.avroConfig.useTopicSchema: topic projects/p/topics/plain has no schema');
  });
});
