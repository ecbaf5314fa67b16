import { describe, expect, it } from 'vitest';
import { emptyResult } from '../../src/connector/connector.js';
import { registerConnector } from '../../src/connector/registry.js';
import { tempDir } from '../helpers/temp-dir.js';
import { openExport } from '../helpers/export.js';

/** Configs the probe connector was asked to load, and connectors it made. */
const loaded: unknown[] = [];
let created = 0;

registerConnector<{ table: string }>({
  name: 'load-probe',
  parseConfig: (raw) => ({ table: String((raw as { table: unknown }).table) }),
  create: () => {
    created++;
    return { open: async () => {}, write: async () => emptyResult(), flush: async () => emptyResult(), close: async () => {} };
  },
  load: async (config) => {
    loaded.push(config);
  },
});

describe('ExportManager.load', () => {
  it("loads each export subscription's connector with its parsed config, and starts nothing", async () => {
    const dir = tempDir();
    const env = await openExport(dir.path, {}, { start: false });
    try {
      await env.core.createTopic('events');
      await env.core.createSubscription('to-x', { topic: 'events', exportConfig: { connector: 'load-probe', table: 'x' } });
      await env.core.createSubscription('to-y', { topic: 'events', exportConfig: { connector: 'load-probe', table: 'y' } });
      await env.core.createSubscription('plain', { topic: 'events' });
      await env.exports.load();
      expect(loaded).toEqual([{ table: 'x' }, { table: 'y' }]);
      expect(created).toBe(0);
      expect(env.exports.runner('to-x')).toBeUndefined();
    } finally {
      await env.close();
      dir.remove();
    }
  });
});
