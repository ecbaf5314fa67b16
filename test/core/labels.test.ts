import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { openCore } from '../helpers/core.js';
import { tempDir } from '../helpers/temp-dir.js';

const AVRO = JSON.stringify({ type: 'record', name: 'Order', fields: [{ name: 'id', type: 'string' }] });

describe('labels', () => {
  it('stored before Orderly checked them, they stay until changed: other updates of the subscription go through', async () => {
    const dir = tempDir();
    try {
      let { core } = await openCore(dir.path);
      await core.createTopic('events');
      const created = await core.createSubscription('old-labels', { topic: 'events', labels: { team: 'sales' } });
      await core.close();
      // As an older version stored them: a key Google Cloud's rules refuse.
      const store = SqliteStore.open(dir.path, { durability: 'process' });
      const { name: _name, state: _state, detached: _detached, topicMessageRetentionDuration: _t, ...spec } = created;
      await store.updateSubscriptionSpec(created.name, { ...spec, labels: { Team: 'Sales' } });
      await store.close();

      ({ core } = await openCore(dir.path));
      try {
        expect((await core.updateSubscription('old-labels', { ackDeadlineSeconds: 30 })).labels).toEqual({ Team: 'Sales' });
        await expect(core.updateSubscription('old-labels', { labels: { Team: 'Sales' } })).rejects.toThrow('label key "Team"');
        expect((await core.updateSubscription('old-labels', { labels: { team: 'sales' } })).labels).toEqual({ team: 'sales' });
      } finally {
        await core.close();
      }
    } finally {
      dir.remove();
    }
  });

  it('updates started together that change different fields all land, in memory and in the store', async () => {
    const dir = tempDir();
    try {
      let { core } = await openCore(dir.path);
      await core.createTopic('events');
      await core.createSubscription('updated-twice', { topic: 'events' });
      await core.createSnapshot('snap-twice', { subscription: 'updated-twice' });
      const expireTime = core.getSnapshot('snap-twice').expireTime - 60_000;
      // Each computed its change from the resource as it was when it started: the last one undid the first.
      await Promise.all([
        core.updateTopic('events', { labels: { team: 'sales' } }),
        core.updateTopic('events', { messageRetentionDuration: 3600 }),
        core.updateSubscription('updated-twice', { labels: { team: 'sales' } }),
        core.updateSubscription('updated-twice', { ackDeadlineSeconds: 30 }),
        core.updateSubscription('updated-twice', { retainAckedMessages: true }),
        core.updateSnapshot('snap-twice', { labels: { team: 'sales' } }),
        core.updateSnapshot('snap-twice', { expireTime }),
      ]);
      // A schema deleted while an update of its topic runs: the topic names _deleted-schema_ afterwards.
      await core.schemas.create({ parent: 'projects/p', schemaId: 'gone', schema: { type: 'AVRO', definition: AVRO } });
      await core.createTopic('typed', { schemaSettings: { schema: 'projects/p/schemas/gone', encoding: 'BINARY' } });
      await Promise.all([core.updateTopic('typed', { labels: { a: 'b' } }), core.schemas.delete('projects/p/schemas/gone')]);
      const check = () => {
        expect(core.getTopic('events')).toMatchObject({ labels: { team: 'sales' }, messageRetentionDuration: 3600 });
        expect(core.getSubscription('updated-twice')).toMatchObject({
          labels: { team: 'sales' },
          ackDeadlineSeconds: 30,
          retainAckedMessages: true,
        });
        expect(core.getSnapshot('snap-twice')).toMatchObject({ labels: { team: 'sales' }, expireTime });
        expect(core.getTopic('typed')).toMatchObject({ labels: { a: 'b' }, schemaSettings: { schema: '_deleted-schema_' } });
      };
      check();
      await core.close();
      ({ core } = await openCore(dir.path));
      try {
        check();
      } finally {
        await core.close();
      }
    } finally {
      dir.remove();
    }
  });
});
