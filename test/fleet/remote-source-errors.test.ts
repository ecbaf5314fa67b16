import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeDuckDb, queryDuckDb } from '../../src/duckdb/database.js';
import { loadJob } from '../../src/job/job-config.js';
import { JobRuntime } from '../../src/job/job-runtime.js';
import { remoteStatusOf, type RemoteStatus } from '../../src/job/metrics.js';
import { createLogger } from '../../src/log.js';
import { orderly } from '../helpers/cli.js';
import { closedPort } from '../helpers/closed-port.js';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait-for.js';
import { PROJECT, startRemote, writeRemoteJob } from '../helpers/fleet.js';
import { startServe, type ServeProcess } from '../helpers/serve-process.js';

let remote: Awaited<ReturnType<typeof startRemote>>;
let guarded: ServeProcess;
const dirs: ReturnType<typeof tempDir>[] = [];
const TOKEN = 'the-right-token-4f1c';

beforeAll(async () => {
  [remote, guarded] = await Promise.all([startRemote(), startServe([], { ORDERLY_TOKEN: TOKEN })]);
  const [topic] = await remote.client().createTopic('events');
  await topic.createSubscription('unordered', {});
}, 60_000);

afterAll(async () => {
  await remote?.close();
  await guarded?.stop();
  for (const d of dirs) d.remove();
});

const METADATA_TABLE =
  'CREATE TABLE events(subscription_name VARCHAR, message_id VARCHAR, publish_time TIMESTAMP, data VARCHAR, attributes JSON)';

/** A worker of a job with one remote export (DuckDB), run in this process; its export's status row. */
async function worker(
  host: string,
  subscription: string,
  remoteSettings: Record<string, unknown> = {},
  table: { init: string; bigqueryConfig: Record<string, unknown> } = {
    init: METADATA_TABLE,
    bigqueryConfig: { table: 'p.main.events', writeMetadata: true },
  },
) {
  const dir = tempDir('orderly-remote-err-');
  dirs.push(dir);
  const duckdbPath = join(dir.path, 'export.duckdb');
  const file = writeRemoteJob(
    dir.path,
    host,
    { duckdb: { path: duckdbPath, init: [table.init] } },
    { exports: [{ subscription, enableMessageOrdering: true, bigqueryConfig: table.bigqueryConfig }], ...remoteSettings },
  );
  const job = loadJob(file);
  const runtime = await JobRuntime.start(job, createLogger({ level: 'silent' }), { serveMetrics: true });
  const status = () => remoteStatusOf(runtime.exports)[0]!;
  return { file, runtime, status, duckdbPath };
}

/** Waits until the source has failed at least `retries` times, then returns the status row. */
async function failedAtLeast(status: () => RemoteStatus, retries: number): Promise<RemoteStatus> {
  await waitFor(`${retries} failed attempts`, () => status().source.retries >= retries, 30_000);
  return status();
}

describe('a remote source that cannot be read: a clear error naming it, retried with backoff, shown in status', () => {
  it('a subscription that does not exist: NOT_FOUND, retried until it is created, then streaming', async () => {
    const { runtime, status, file } = await worker(remote.host, 'created-later');
    try {
      const row = await failedAtLeast(status, 2);
      expect(row.source).toMatchObject({ location: remote.host, state: 'retrying' });
      expect(row.source.error).toBe(
        `remote subscription projects/${PROJECT}/subscriptions/created-later does not exist at ${remote.host} ` +
          `(NOT_FOUND: Subscription not found: projects/${PROJECT}/subscriptions/created-later); create it, or fix the name in remote.exports`,
      );
      expect(Date.parse(row.sourceRetryAt!)).toBeGreaterThan(Date.now() - 1000);
      // `orderly status` (another process) shows this worker's row, read from its /status.
      const cli = JSON.parse((await orderly('status', file, '--json')).stdout) as RemoteStatus[];
      expect(cli).toEqual([
        expect.objectContaining({ worker: row.worker, source: expect.objectContaining({ state: 'retrying', error: row.source.error }) }),
      ]);
      await remote.client().topic('events').createSubscription('created-later', { enableMessageOrdering: true });
      await waitFor('the worker to stream once the subscription exists', () => status().source.state === 'streaming', 90_000);
      expect(status().source.error).toBeUndefined();
    } finally {
      await runtime.stop();
    }
  }, 120_000);

  it('an endpoint nobody listens on: UNAVAILABLE, naming the endpoint and the subscription', async () => {
    const host = `127.0.0.1:${await closedPort()}`;
    const { runtime, status } = await worker(host, 'events-export');
    try {
      const row = await failedAtLeast(status, 2);
      expect(row.source.state).toBe('retrying');
      expect(row.source.error).toMatch(
        new RegExp(
          `^cannot reach the Pub/Sub endpoint ${host} for subscription projects/${PROJECT}/subscriptions/events-export \\(UNAVAILABLE: `,
        ),
      );
    } finally {
      await runtime.stop();
    }
  });

  it('a wrong bearer token for an `orderly serve` with one: UNAUTHENTICATED; the right token streams; no token in status', async () => {
    await guardedSubscription();
    const wrong = await worker(guarded.host, 'events-export', { authToken: 'not-the-token' });
    const right = await worker(guarded.host, 'events-export', { authToken: TOKEN });
    try {
      const row = await failedAtLeast(wrong.status, 2);
      expect(row.source.error).toMatch(
        new RegExp(
          `^the Pub/Sub endpoint ${guarded.host} refused the credentials for subscription projects/${PROJECT}/subscriptions/events-export \\(UNAUTHENTICATED: .*\\); check remote.authToken$`,
        ),
      );
      await waitFor('the worker with the right token to stream', () => right.status().source.state === 'streaming');
      expect(JSON.stringify([row, right.status()])).not.toMatch(/not-the-token|the-right-token/);
    } finally {
      await wrong.runtime.stop();
      await right.runtime.stop();
    }
  });

  // Each reopen of a failed stream reads the subscription again; its failure, already described, was
  // described once more: "reading subscription ... failed (error: the Pub/Sub endpoint ... refused ...)",
  // and a refusal (kind `refused`) became `retrying`.
  it('a token that stops working mid-stream (the endpoint restarted with another): each reopen says UNAUTHENTICATED once, plainly', async () => {
    const dir = tempDir('orderly-rotated-');
    dirs.push(dir);
    const config = join(dir.path, 'serve.yaml');
    writeFileSync(config, stringify({ projectId: PROJECT, dataDir: join(dir.path, 'data'), durability: 'process' }));
    let server = await startServe(['--config', config], { ORDERLY_TOKEN: TOKEN });
    await createWithToken(server.host);
    const { runtime, status } = await worker(server.host, 'events-export', { authToken: TOKEN });
    try {
      await waitFor('the worker to stream', () => status().source.state === 'streaming');
      await server.stop();
      server = await startServe(['--config', config, '--port', String(server.port)], { ORDERLY_TOKEN: 'a-rotated-token-9d2e' });
      const errors = new Set<string>();
      await waitFor(
        'three failed attempts with the rotated token',
        () => {
          const { error, retries } = status().source;
          if (error?.includes('UNAUTHENTICATED')) errors.add(error);
          return errors.size > 0 && retries >= 4;
        },
        60_000,
      );
      expect([...errors]).toEqual([
        expect.stringMatching(
          new RegExp(
            `^the Pub/Sub endpoint ${server.host} refused the credentials for subscription projects/${PROJECT}/subscriptions/events-export \\(UNAUTHENTICATED: .*\\); check remote.authToken$`,
          ),
        ),
      ]);
    } finally {
      await runtime.stop();
      await server.stop();
    }
  });

  it('Google Cloud Pub/Sub with unusable credentials (GOOGLE_APPLICATION_CREDENTIALS): says so, without a call', async () => {
    const before = process.env.GOOGLE_APPLICATION_CREDENTIALS;
    process.env.GOOGLE_APPLICATION_CREDENTIALS = join(tempDir().path, 'missing-key.json');
    const { runtime, status } = await worker('', 'events-export', { endpoint: undefined });
    try {
      const row = await failedAtLeast(status, 2);
      expect(row.source.location).toBe('pubsub.googleapis.com:443');
      expect(row.source.error).toMatch(
        new RegExp(
          `^no usable Google credentials for subscription projects/${PROJECT}/subscriptions/events-export at pubsub.googleapis.com:443 \\(.*GOOGLE_APPLICATION_CREDENTIALS.*\\); set GOOGLE_APPLICATION_CREDENTIALS`,
        ),
      );
    } finally {
      await runtime.stop();
      if (before === undefined) delete process.env.GOOGLE_APPLICATION_CREDENTIALS;
      else process.env.GOOGLE_APPLICATION_CREDENTIALS = before;
    }
  });

  it('a detached subscription: refused, saying so', async () => {
    const client = remote.client();
    await client.topic('events').createSubscription('detached', { enableMessageOrdering: true });
    await client.detachSubscription('detached');
    const { runtime, status } = await worker(remote.host, 'detached');
    try {
      const row = await failedAtLeast(status, 1);
      expect(row.source.state).toBe('refused');
      expect(row.source.error).toBe(
        `remote subscription projects/${PROJECT}/subscriptions/detached at ${remote.host} is detached from its topic and receives no messages; export from another subscription`,
      );
    } finally {
      await runtime.stop();
    }
  });

  it('a subscription that becomes a push subscription while streaming: refused from the end of its stream on', async () => {
    const client = remote.client();
    await client.topic('events').createSubscription('becomes-push', { enableMessageOrdering: true });
    const { runtime, status } = await worker(remote.host, 'becomes-push');
    try {
      await waitFor('streaming', () => status().source.state === 'streaming', 30_000);
      await client.subscription('becomes-push').modifyPushConfig({ pushEndpoint: 'http://127.0.0.1:9/push' });
      const row = await failedAtLeast(status, 1);
      // Not `retrying` until the settings are read again: the endpoint said what the subscription is.
      expect(row.source.state).toBe('refused');
      expect(row.source.error).toMatch(
        new RegExp(
          `^remote subscription projects/${PROJECT}/subscriptions/becomes-push at ${remote.host} (cannot be pulled \\(FAILED_PRECONDITION: |is a push or export subscription)`,
        ),
      );
    } finally {
      await runtime.stop();
    }
  });

  it('a subscription with ordering off, while the job asks for per-key order: refused, nothing pulled', async () => {
    const { runtime, status } = await worker(remote.host, 'unordered');
    try {
      const row = await failedAtLeast(status, 1);
      expect(row.source.state).toBe('refused');
      expect(row.source.error).toMatch(
        new RegExp(
          `^remote subscription projects/${PROJECT}/subscriptions/unordered at ${remote.host} has message ordering off, but the job asks for per-key order`,
        ),
      );
      expect(row.backlog).toBe(0);
    } finally {
      await runtime.stop();
    }
  });
});

describe('a message the sink refuses, from a remote subscription', () => {
  it('is nacked and the rest of its key waits; the remote deadLetterPolicy takes it; then the key goes on, in order', async () => {
    const client = remote.client();
    const [dead] = await client.createTopic('cdc-dead');
    const [deadLetters] = await dead.createSubscription('cdc-dead-sub');
    const [topic] = await client.createTopic('cdc');
    await topic.createSubscription('cdc-table', {
      enableMessageOrdering: true,
      deadLetterPolicy: { deadLetterTopic: `projects/${PROJECT}/topics/cdc-dead`, maxDeliveryAttempts: 5 },
    });
    const publisher = client.topic('cdc', { messageOrdering: true });
    const rows = ['a:1', 'a:2:bad', 'a:3', 'a:4', 'a:5', 'b:1', 'b:2', 'b:3'];
    for (const r of rows) {
      const [k, n, bad] = r.split(':');
      await publisher.publishMessage({ json: { k, n: bad ? 'not a number' : Number(n) }, orderingKey: k! });
    }
    const { runtime, duckdbPath } = await worker(
      remote.host,
      'cdc-table',
      {},
      {
        init: 'CREATE TABLE kv(k VARCHAR, n INTEGER)',
        bigqueryConfig: { table: 'p.main.kv', useTableSchema: true },
      },
    );
    try {
      const received: string[] = [];
      deadLetters.on('message', (m) => {
        received.push(`${m.data.toString()} ${m.attributes.CloudPubSubDeadLetterSourceDeliveryCount}`);
        m.ack();
      });
      await waitFor('the refused message in the dead-letter topic', () => received.length > 0, 30_000);
      expect(received).toEqual(['{"k":"a","n":"not a number"} 5']);
      await waitFor('the rest of key a', async () => (await queryDuckDb(duckdbPath, 'SELECT count(*) AS n FROM kv'))[0]!.n === 7n, 30_000);
      const written = await queryDuckDb(duckdbPath, 'SELECT k, n FROM kv ORDER BY rowid');
      const of = (k: string) => written.filter((r) => r.k === k).map((r) => r.n);
      expect(of('a')).toEqual([1, 3, 4, 5]);
      expect(of('b')).toEqual([1, 2, 3]);
      await deadLetters.close();
    } finally {
      await runtime.stop();
      await closeDuckDb(duckdbPath);
    }
  }, 60_000);
});

/** The subscription on the token-guarded server (created once, with the token). */
let guardedReady: Promise<void> | undefined;
function guardedSubscription(): Promise<void> {
  guardedReady ??= createWithToken(guarded.host);
  return guardedReady;
}

/** Topic `events` and ordered subscription `events-export` on a server guarded by TOKEN. */
async function createWithToken(host: string): Promise<void> {
  const auth = { authorization: `Bearer ${TOKEN}` };
  const base = `http://${host}/v1/projects/${PROJECT}`;
  const put = (path: string, body: unknown) =>
    fetch(`${base}/${path}`, { method: 'PUT', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  expect((await put('topics/events', {})).ok).toBe(true);
  expect((await put('subscriptions/events-export', { topic: `projects/${PROJECT}/topics/events`, enableMessageOrdering: true })).ok).toBe(
    true,
  );
}
