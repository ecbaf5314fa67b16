import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Backoff } from '../../src/connector/backoff.js';
import { emptyResult, SinkStateError, type ConnectorContext, type ExportMessage, type WriteResult } from '../../src/connector/connector.js';
import { ExportManager } from '../../src/connector/export-manager.js';
import { registerConnector } from '../../src/connector/registry.js';
import { PubSubCore } from '../../src/core/pubsub-core.js';
import { statusOf } from '../../src/job/metrics.js';
import { createLogger } from '../../src/log.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait-for.js';

/**
 * Connectors that break the contract the way real ones do (docs/connectors.md): the runner keeps the
 * export moving, in order, and shows what is wrong, rather than freezing, stalling silently or stopping.
 */
type Mode =
  | 'reject-undefined-once'
  | 'flush-on-a-timer'
  | 'defer-once'
  | 'hang'
  | 'unknown-state'
  | 'refuse-in-create'
  | 'plain'
  | 'busy-a-minute'
  | 'busy-throws'
  | 'counters-throw';

/** What each subscription's connector wrote, in order: message data. */
const sink = new Map<string, string[]>();
/** Writes per subscription, across the connectors the runner makes after failures. */
const calls = new Map<string, number>();
/** Ends the writes a `hang` connector never ends by itself, so the test can stop. */
const hung: (() => void)[] = [];

registerConnector<{ mode: Mode }>({
  name: 'misbehaving',
  parseConfig: (raw) => ({ mode: (raw as { mode: Mode }).mode }),
  create: ({ mode }, context: ConnectorContext) => {
    if (mode === 'refuse-in-create') throw new Error('no such region');
    const written = (messages: ExportMessage[]) => {
      const list = sink.get(context.subscription) ?? [];
      list.push(...messages.map((m) => m.message.data.toString()));
      sink.set(context.subscription, list);
      return messages.map((m) => m.id);
    };
    let deferredOnce = false;
    const buffered: ExportMessage[] = [];
    const done: ExportMessage[] = [];
    let failedOnce = false;
    return {
      // A counters getter that breaks (against the contract, as busy() may): status and metrics must still answer.
      get counters() {
        if (mode === 'counters-throw') throw new Error('counters broke');
        return undefined;
      },
      open: async () => {},
      write: async (messages): Promise<WriteResult> => {
        const call = (calls.get(context.subscription) ?? 0) + 1;
        calls.set(context.subscription, call);
        switch (mode) {
          case 'reject-undefined-once':
            // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- the misbehaviour under test
            if (call === 1) return Promise.reject(undefined);
            break;
          case 'flush-on-a-timer':
            // Finishes in the background and says so; its flush('all') returns only what is done (a slip).
            buffered.push(...messages);
            setTimeout(() => {
              done.push(...buffered.splice(0));
              context.notify();
            }, 5);
            return emptyResult();
          case 'defer-once':
            // Defers the first message without any failure before it (against the contract), once.
            if (!deferredOnce) {
              deferredOnce = true;
              return { ...emptyResult(), written: written(messages.slice(1)), deferred: [messages[0]!.id] };
            }
            break;
          case 'hang':
            return new Promise((resolve) => hung.push(() => resolve(emptyResult())));
          case 'unknown-state':
            if (call === 1) throw new SinkStateError('UNAVAILABLE' as never, 'the sink is away');
            break;
          case 'counters-throw':
            // Once, a failure of the sink: the runner retires this connector (reading its counters).
            if (!failedOnce && call === 1) {
              failedOnce = true;
              throw new Error('sink hiccup');
            }
            break;
          case 'plain':
            break;
        }
        return { ...emptyResult(), written: written(messages) };
      },
      flush: async () => ({ ...emptyResult(), written: written(done.splice(0)) }),
      close: async () => {},
      // Background work (an upload) without progress for a minute; or a busy() that breaks the contract.
      busy: () => {
        if (mode === 'busy-throws') throw new Error('busy broke');
        return mode === 'busy-a-minute' ? { name: 'upload of x', since: Date.now() - 60_000 } : undefined;
      },
    };
  },
});

let dir: ReturnType<typeof tempDir>;
let core: PubSubCore;
let exports: ExportManager;
beforeEach(async () => {
  dir = tempDir();
  core = await PubSubCore.open({ store: SqliteStore.open(join(dir.path, 'store'), { durability: 'process' }), projectId: 'p', tickMs: 20 });
  exports = new ExportManager({
    core,
    settings: { dataDir: dir.path },
    logger: createLogger(),
    runner: { flushIntervalMs: 100, maxOutstandingMessages: 100, stallMs: 300, backoff: () => new Backoff(20, 200) },
  });
  await exports.start();
  await core.createTopic('events');
});
afterEach(async () => {
  for (const end of hung.splice(0)) end();
  await exports.stop();
  await core.close();
  dir.remove();
});

async function exportWith(name: string, mode: Mode, messages = 300) {
  sink.delete(`projects/p/subscriptions/${name}`);
  calls.delete(`projects/p/subscriptions/${name}`);
  await core.createSubscription(name, { topic: 'events', enableMessageOrdering: true, exportConfig: { connector: 'misbehaving', mode } });
  await exports.sync();
  await core.publish(
    'events',
    Array.from({ length: messages }, (_, i) => ({ data: `k${i % 10}-${Math.floor(i / 10)}`, orderingKey: `k${i % 10}` })),
  );
}
const written = (name: string) => sink.get(`projects/p/subscriptions/${name}`) ?? [];
const row = (name: string) => statusOf(core, exports).find((r) => r.subscription === `projects/p/subscriptions/${name}`)!;
const drained = (name: string) => waitFor(`${name} drained`, () => core.metrics(name).backlogMessages === 0);

/** Per key, in the order the sink holds them: each key's messages must rise. */
function inKeyOrder(lines: string[]): boolean {
  const last = new Map<string, number>();
  return lines.every((line) => {
    const [key, n] = line.split('-');
    const ok = Number(n) > (last.get(key!) ?? -1);
    last.set(key!, Number(n));
    return ok;
  });
}

describe('a misbehaving connector', () => {
  it('that rejects with undefined fails into RESOURCE_ERROR and is reopened (the runner had stopped for good)', async () => {
    await exportWith('rejects', 'reject-undefined-once');
    await drained('rejects');
    expect(written('rejects')).toHaveLength(300);
    expect(inKeyOrder(written('rejects'))).toBe(true);
    expect(row('rejects')).toMatchObject({ state: 'ACTIVE', exportErrors: 1, lastExportError: { message: 'undefined' } });
  });

  it('whose flush returns before its timer finished the work still drains, with the event loop free (it had spun the process)', async () => {
    await exportWith('timer', 'flush-on-a-timer');
    await drained('timer');
    expect(written('timer')).toHaveLength(300);
    expect(inKeyOrder(written('timer'))).toBe(true);
  });

  it('that defers a message without a failure before it gets it delivered again, not left leased while its key moves on', async () => {
    await exportWith('defers', 'defer-once', 30);
    await drained('defers');
    const lines = written('defers');
    expect(lines).toContain('k0-0');
    // The key's later messages come again after it (the redelivery rule): its last run is in order.
    expect(lines.slice(lines.lastIndexOf('k0-0')).filter((l) => l.startsWith('k0-'))).toEqual(['k0-0', 'k0-1', 'k0-2']);
  });

  it('that never returns shows as stalled in status, and deleting its subscription holds up no other export', async () => {
    await exportWith('hangs', 'hang', 10);
    await waitFor('the stall in status', () => row('hangs').exportStalled !== undefined);
    expect(row('hangs').exportStalled).toMatch(/^the export connector's write has not returned for \d+ s$/);

    await core.deleteSubscription('hangs');
    await exportWith('after', 'plain', 10);
    await drained('after');
    expect(written('after')).toHaveLength(10);
  });

  it('whose background work has made no progress past the limit shows as stalled, though every call returns', async () => {
    await exportWith('background', 'busy-a-minute', 10);
    await drained('background');
    await waitFor('the stall in status', () => row('background').exportStalled !== undefined);
    expect(row('background').exportStalled).toMatch(/^the export connector's upload of x has not returned for 6\d s$/);
  });

  it('whose busy() throws still exports, on the timer as after each call (the job does not crash)', async () => {
    await exportWith('busy-throws', 'busy-throws', 10);
    await drained('busy-throws');
    expect(written('busy-throws')).toHaveLength(10);
    expect(row('busy-throws').exportStalled).toBeUndefined();
  });

  it('whose counters getter throws still exports and recovers from a failure, and status still answers (it had thrown, hanging /status)', async () => {
    await exportWith('counters-throw', 'counters-throw', 10);
    await drained('counters-throw');
    expect(written('counters-throw')).toHaveLength(10);
    expect(row('counters-throw')).toMatchObject({ state: 'ACTIVE', exportErrors: 1 });
    expect(row('counters-throw').exportCounters).toBeUndefined();
  });

  it('that refuses its settings in create with an Error of its own refuses the subscription with INVALID_ARGUMENT (it had been INTERNAL, a 500)', async () => {
    await expect(
      core.createSubscription('refused', { topic: 'events', exportConfig: { connector: 'misbehaving', mode: 'refuse-in-create' } }),
    ).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: 'exportConfig: connector "misbehaving" refused these settings: no such region',
    });
    expect(core.hasSubscription('refused')).toBe(false);
  });

  it('that throws a SinkStateError with a state Pub/Sub does not have shows RESOURCE_ERROR, naming it', async () => {
    const error = new SinkStateError('UNAVAILABLE' as never, 'the sink is away');
    expect(error.state).toBe('RESOURCE_ERROR');
    expect(error.message).toBe('the sink is away (the connector gave the state "UNAVAILABLE", which Pub/Sub does not have)');
    await exportWith('odd-state', 'unknown-state', 10);
    await drained('odd-state');
    expect(row('odd-state').lastExportError?.message).toBe(error.message);
  });
});
