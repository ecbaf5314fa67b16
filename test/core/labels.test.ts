import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { openCore, tempDir } from '../helpers/core.js';

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
});
