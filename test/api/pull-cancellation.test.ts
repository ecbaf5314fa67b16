import * as grpc from '@grpc/grpc-js';
import { v1 } from '@google-cloud/pubsub';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { servePerFile } from '../helpers/serve-process.js';

const { server } = servePerFile();
const project = 'pull-cancel';
const topicName = (id: string) => `projects/${project}/topics/${id}`;
const subscriptionName = (id: string) => `projects/${project}/subscriptions/${id}`;

let publisher: v1.PublisherClient;
let subscriber: v1.SubscriberClient;
beforeAll(() => {
  const [servicePath, port] = server.host.split(':');
  const options = { servicePath, port: Number(port), sslCreds: grpc.credentials.createInsecure(), projectId: project };
  publisher = new v1.PublisherClient(options);
  subscriber = new v1.SubscriberClient(options);
});
afterAll(async () => {
  await Promise.all([publisher?.close(), subscriber?.close()]);
});

/** A subscription with a dead-letter policy, so that each delivery's deliveryAttempt is reported. */
async function subscriptionWithDeadLetters(id: string): Promise<string> {
  await publisher.createTopic({ name: topicName(id) });
  await publisher.createTopic({ name: topicName(`${id}-dead`) });
  await subscriber.createSubscription({
    name: subscriptionName(id),
    topic: topicName(id),
    deadLetterPolicy: { deadLetterTopic: topicName(`${id}-dead`), maxDeliveryAttempts: 5 },
  });
  return subscriptionName(id);
}

describe('a Pull the client gave up on takes no messages (a delivery attempt nobody saw)', () => {
  it("gRPC, Google's v1 client: Pulls past their deadline leave the next message to the next Pull, as attempt 1", async () => {
    const subscription = await subscriptionWithDeadLetters('grpc');
    for (let i = 0; i < 3; i++) {
      const timedOut = subscriber.pull({ subscription, maxMessages: 5 }, { timeout: 500, retry: null });
      await expect(timedOut).rejects.toMatchObject({ code: grpc.status.DEADLINE_EXCEEDED });
    }
    await publisher.publish({ topic: topicName('grpc'), messages: [{ data: Buffer.from('x') }] });
    const started = Date.now();
    const [pulled] = await subscriber.pull({ subscription, maxMessages: 5 }, { timeout: 15_000 });
    expect(pulled.receivedMessages?.map((m) => [m.message?.data?.toString(), m.deliveryAttempt])).toEqual([['x', 1]]);
    // Waiting Pulls answer as soon as a message is there; the gone ones no longer stand in line for it.
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('REST: Pulls whose HTTP request was closed leave the next message to the next Pull, as attempt 1', async () => {
    const subscription = await subscriptionWithDeadLetters('rest');
    const pull = (signal?: AbortSignal) =>
      fetch(`http://${server.host}/v1/${subscription}:pull`, { method: 'POST', body: JSON.stringify({ maxMessages: 5 }), signal });
    for (let i = 0; i < 3; i++) {
      const closed = pull(AbortSignal.timeout(300));
      await expect(closed).rejects.toMatchObject({ name: 'TimeoutError' });
    }
    await publisher.publish({ topic: topicName('rest'), messages: [{ data: Buffer.from('y') }] });
    const answer = (await (await pull()).json()) as { receivedMessages?: { message: { data: string }; deliveryAttempt: number }[] };
    expect(answer.receivedMessages?.map((m) => [Buffer.from(m.message.data, 'base64').toString(), m.deliveryAttempt])).toEqual([['y', 1]]);
  });
});
