import { describe, expect, it } from 'vitest';
import { openCore } from '../helpers/core.js';
import { tempDir } from '../helpers/temp-dir.js';

describe('creates of one name started together', () => {
  it('one is created, the others are ALREADY_EXISTS (not a SQLite constraint error)', async () => {
    const dir = tempDir();
    const { core } = await openCore(dir.path);
    try {
      // Each checked the name before the first was stored: the second reached the store's UNIQUE constraint.
      const topics = await Promise.allSettled([core.createTopic('twice'), core.createTopic('twice'), core.createTopic('twice')]);
      expect(topics.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'rejected']);
      for (const r of topics.slice(1)) expect((r as PromiseRejectedResult).reason).toMatchObject({ code: 'ALREADY_EXISTS' });
      const subs = await Promise.allSettled([
        core.createSubscription('twice-sub', { topic: 'twice' }),
        core.createSubscription('twice-sub', { topic: 'twice' }),
      ]);
      expect(subs.map((r) => r.status)).toEqual(['fulfilled', 'rejected']);
      expect((subs[1] as PromiseRejectedResult).reason).toMatchObject({ code: 'ALREADY_EXISTS' });
      expect(core.listTopics().map((t) => t.name)).toEqual(['projects/p/topics/twice']);
      expect(core.listTopicSubscriptions('twice')).toHaveLength(1);
      // The name is free again once its topic is deleted.
      await core.deleteTopic('twice');
      await expect(core.createTopic('twice')).resolves.toMatchObject({ name: expect.stringMatching(/\/topics\/twice$/) });
    } finally {
      await core.close();
      dir.remove();
    }
  });
});
