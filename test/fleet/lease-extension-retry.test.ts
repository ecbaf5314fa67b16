import { expect, it } from 'vitest';
import { createPubSubClient, LEASE_EXTENSION_RETRY_MS } from '../../src/connector/sources/remote-endpoint.js';
import { closedPort } from '../helpers/closed-port.js';
import { PROJECT } from '../helpers/fleet.js';

// Google's client schedules a worker's next lease extension at 0.9 × the ack deadline minus the 99th percentile
// of ModifyAckDeadline latency; with its own retries (600 s) an unreachable endpoint made that negative, and the
// client re-extended every held message on each turn of the loop (100% CPU, GBs of retried requests). The
// workers' client gives a failing lease extension up within seconds; it is sent again by the next extension.
it('a lease extension to an endpoint nobody listens on is retried for seconds, then fails: not for 600 s', async () => {
  const client = createPubSubClient({ endpoint: `127.0.0.1:${await closedPort()}`, projectId: PROJECT });
  const started = Date.now();
  const error = await new Promise<Error & { code?: number }>((resolve) =>
    client.request(
      {
        client: 'SubscriberClient',
        method: 'modifyAckDeadline',
        reqOpts: { subscription: `projects/${PROJECT}/subscriptions/held`, ackIds: ['an-ack-id'], ackDeadlineSeconds: 10 },
        gaxOpts: {},
      },
      (e: Error | null) => resolve(e ?? new Error('the extension succeeded')),
    ),
  );
  const elapsed = Date.now() - started;
  await client.close();
  // UNAVAILABLE (the last attempt's) or DEADLINE_EXCEEDED (the retries' total), depending on where the time ran out.
  expect([4, 14]).toContain(error.code);
  expect(elapsed).toBeGreaterThanOrEqual(LEASE_EXTENSION_RETRY_MS / 2); // retried, not given up at once
  expect(elapsed).toBeLessThan(LEASE_EXTENSION_RETRY_MS + 3_000);
}, 30_000);
