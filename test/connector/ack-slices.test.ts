import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { emptyResult, type Connector, type ExportMessage } from '../../src/connector/connector.js';
import { ExportManager } from '../../src/connector/export-manager.js';
import { ExportRunner } from '../../src/connector/export-runner.js';
import { registerConnector } from '../../src/connector/registry.js';
import { EmbeddedSource } from '../../src/connector/sources/embedded-source.js';
import { PubSubCore } from '../../src/core/pubsub-core.js';
import { createLogger } from '../../src/log.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait-for.js';

/**
 * The runner hands a large write result's acks to the core a slice per turn of the event loop. What is
 * still queued is handed over before the runner lets go of the subscription at stop, and before any nack
 * (which would revoke what those acks ack): nothing the sink holds comes again because of the slicing.
 */
const written: string[] = [];
/** What the `first-fails-last` connector was given, in order, and the message it failed (message data). */
const given: string[] = [];
let failedData: string | undefined;

registerConnector<Record<string, never>>({
  name: 'flush-at-stop',
  parseConfig: () => ({}),
  create: () => {
    const buffered: ExportMessage[] = [];
    return {
      open: async () => {},
      write: async (messages) => {
        buffered.push(...messages);
        return emptyResult();
      },
      flush: async () => {
        const done = buffered.splice(0);
        written.push(...done.map((m) => m.message.data.toString()));
        return { ...emptyResult(), written: done.map((m) => m.id) };
      },
      close: async () => {},
    };
  },
});

/** Messages the `written-at-once` connector reports written together (11 ack slices). */
const WRITTEN_AT_ONCE = 5_500;
/** The runner of the `written-at-once` export, and what it still held when a turn queued as its write returned ran. */
let writtenAtOnceRunner: ExportRunner | undefined;
let heldAfterWrite: number | undefined;

registerConnector<Record<string, never>>({
  name: 'written-at-once',
  parseConfig: () => ({}),
  create: () => {
    const buffered: ExportMessage[] = [];
    return {
      open: async () => {},
      // Buffers until it has WRITTEN_AT_ONCE messages, then reports them all written at once,
      // as a committed file does.
      write: async (messages) => {
        buffered.push(...messages);
        if (buffered.length < WRITTEN_AT_ONCE) return emptyResult();
        setImmediate(() => (heldAfterWrite = writtenAtOnceRunner!.outstanding));
        return { ...emptyResult(), written: buffered.splice(0).map((m) => m.id) };
      },
      flush: async () => emptyResult(),
      close: async () => {},
    };
  },
});

/**
 * Reports a key's later messages written before its first one, then the first one failed (as a file
 * connector whose earlier file's upload fails after a later file committed): the later acks are sliced,
 * and the nack must not overtake them. `notify` asks the runner for a flush (ConnectorContext.notify).
 */
function firstFailsLast(count: number, notify: () => void): Connector {
  const buffered: ExportMessage[] = [];
  let first: ExportMessage | undefined;
  const settle = async () => {
    if (first) {
      const failed = first;
      first = undefined;
      failedData = failed.message.data.toString();
      return { ...emptyResult(), failed: [{ id: failed.id, error: 'the earlier file did not upload', retryable: true }] };
    }
    if (buffered.length < count) return emptyResult();
    const all = buffered.splice(0);
    // The first message of the key delivered last: the rest of that key is at the end of the acks.
    const lastKey = all.at(-1)!.message.orderingKey;
    first = all.find((m) => m.message.orderingKey === lastKey)!;
    // The failure comes with the next flush, which this asks for at once: its result is applied in the
    // same turn of the event loop as this one, while most of this one's acks are still queued.
    notify();
    return { ...emptyResult(), written: all.filter((m) => m !== first).map((m) => m.id) };
  };
  return {
    open: async () => {},
    write: async (messages) => {
      given.push(...messages.map((m) => m.message.data.toString()));
      // Once failed, the first message comes again alone: written.
      if (given.length > count) return { ...emptyResult(), written: messages.map((m) => m.id) };
      buffered.push(...messages);
      return settle();
    },
    flush: settle,
    close: async () => {},
  };
}

const dir = tempDir('orderly-ack-slices-');
afterEach(() => dir.remove());

it('acks every message of a final flush larger than one ack slice before the export stops', async () => {
  const count = 5_500;
  const open = () => PubSubCore.open({ store: SqliteStore.open(join(dir.path, 'store')) });
  const core = await open();
  await core.createTopic('events');
  await core.createSubscription('exports', { topic: 'events', enableMessageOrdering: true, exportConfig: { connector: 'flush-at-stop' } });
  for (let b = 0; b < count; b += 500)
    await core.publish(
      'events',
      Array.from({ length: 500 }, (_, i) => ({ data: Buffer.from(String(b + i)), orderingKey: `k${(b + i) % 7}` })),
    );
  const exports = new ExportManager({ core, settings: { dataDir: dir.path }, logger: createLogger({ level: 'silent' }) });
  await exports.sync();
  const runner = exports.runner('exports')!;
  // Buffered by the connector and written by nothing yet: the final flush reports them all at once.
  await waitFor('every message delivered to the connector', () => runner.outstanding === count);
  await exports.stop();
  expect(written).toHaveLength(count);
  expect(runner.stats.written).toBe(count);
  await core.close();

  // Acked durably: a restarted core has none of them left in the backlog.
  const reopened = await open();
  try {
    expect(reopened.metrics('exports').backlogMessages).toBe(0);
  } finally {
    await reopened.close();
  }
});

it('sends the acks still queued before a nack: on an exactly-once subscription only the failed message comes again', async () => {
  const count = 8_000;
  const core = await PubSubCore.open({ store: SqliteStore.open(join(dir.path, 'store')) });
  // Exactly-once is for pull subscriptions (Pub/Sub refuses it on export ones): the runner meets it on a
  // remote pull subscription. Here it reads an embedded pull subscription through the same source port.
  let runner: ExportRunner | undefined;
  try {
    await core.createTopic('events');
    await core.createSubscription('exports', { topic: 'events', enableMessageOrdering: true, enableExactlyOnceDelivery: true });
    for (let b = 0; b < count; b += 500)
      await core.publish(
        'events',
        Array.from({ length: 500 }, (_, i) => ({ data: Buffer.from(String(b + i)), orderingKey: `k${(b + i) % 8}` })),
      );
    const source = new EmbeddedSource(core, 'exports', core.identity('exports').uid, { maxPerKey: 5000 });
    const started = new ExportRunner({
      source,
      createConnector: () => firstFailsLast(count, () => started.requestFlush()),
      logger: createLogger({ level: 'silent' }),
    });
    runner = started;
    runner.start();
    await waitFor('every message written', () => started.stats.written >= count);
    // The first message once more, and none of its key's later ones: their acks were final before its nack.
    expect(failedData).toBeDefined();
    expect(given.slice(count)).toEqual([failedData]);
    expect(core.metrics('exports').backlogMessages).toBe(0);
  } finally {
    await runner?.stop();
    await core.close();
  }
});

it('settles a large write result a slice per turn of the event loop, and acks all of it', async () => {
  const count = WRITTEN_AT_ONCE;
  const open = () => PubSubCore.open({ store: SqliteStore.open(join(dir.path, 'store')) });
  const core = await open();
  await core.createTopic('events');
  await core.createSubscription('exports', {
    topic: 'events',
    enableMessageOrdering: true,
    exportConfig: { connector: 'written-at-once' },
  });
  for (let b = 0; b < count; b += 500)
    await core.publish(
      'events',
      Array.from({ length: 500 }, (_, i) => ({ data: Buffer.from(String(b + i)), orderingKey: `k${(b + i) % 7}` })),
    );
  const exports = new ExportManager({ core, settings: { dataDir: dir.path }, logger: createLogger({ level: 'silent' }) });
  await exports.sync();
  writtenAtOnceRunner = exports.runner('exports')!;
  await waitFor('every message acked', () => writtenAtOnceRunner!.stats.written === count);
  // Settling 5,500 deliveries at once held the event loop for all of them (up to 15 ms of the main
  // thread in a 1M-message drain): the next turn ran only once none was held any more.
  expect(heldAfterWrite).toBeGreaterThan(0);
  expect(writtenAtOnceRunner.outstanding).toBe(0);
  await exports.stop();
  await core.close();

  const reopened = await open();
  try {
    expect(reopened.metrics('exports').backlogMessages).toBe(0);
  } finally {
    await reopened.close();
  }
});
