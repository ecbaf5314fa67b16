import { connect } from 'node:http2';
import { describe, expect, it } from 'vitest';
import { rawPubsubClients, servePerFile } from '../helpers/serve-process.js';

const { server, api } = servePerFile();

/** A StreamingPull's first request (field 1 subscription, field 5 stream_ack_deadline_seconds) as a gRPC frame. */
function firstRequest(subscription: string, deadlineSeconds: number): Buffer {
  const name = Buffer.from(subscription);
  const message = Buffer.concat([Buffer.from([(1 << 3) | 2, name.length]), name, Buffer.from([5 << 3, deadlineSeconds])]);
  const header = Buffer.alloc(5);
  header.writeUInt32BE(message.length, 1);
  return Buffer.concat([header, message]);
}

describe('a StreamingPull client that does not read', () => {
  it('is not sent its expired messages again while its stream still holds what it did not read', async () => {
    const topic = 'projects/unread/topics/unread';
    const subscription = 'projects/unread/subscriptions/unread';
    await api.pub('createTopic', { name: topic });
    await api.sub('createSubscription', { name: subscription, topic });
    // 17 messages of 5.5 MB: a response each (at most 10 MB per response), more responses than the stream
    // buffers (16) before it needs draining.
    for (let i = 0; i < 17; i++) await api.pub('publish', { topic, messages: [{ data: Buffer.alloc(5_500_000, i) }] });

    // Plain HTTP/2, so that not reading leaves the data unread: the server's writes queue up in the stream.
    const session = connect(`http://${server.host}`);
    const client = rawPubsubClients(server.host, { 'grpc.max_receive_message_length': 20 * 1024 * 1024 });
    try {
      const stream = session.request(
        { ':method': 'POST', ':path': '/google.pubsub.v1.Subscriber/StreamingPull', 'content-type': 'application/grpc', te: 'trailers' },
        { endStream: false },
      );
      // Ended by the server or at the end of the test: either way not what this test looks at.
      stream.on('error', () => {});
      session.on('error', () => {});
      stream.pause();
      stream.write(firstRequest(subscription, 10));
      // The leases end after 10 s; the messages came again on the same stream, queued behind the first copies,
      // at each expiry without end (a server grew by the size of its backlog every 10 s). Now they wait for a
      // consumer that takes them.
      let pulled = 0;
      const until = Date.now() + 25_000;
      while (!pulled && Date.now() < until)
        pulled = ((await client.sub('pull', { subscription, maxMessages: 1 })) as { receivedMessages: unknown[] }).receivedMessages.length;
      expect(pulled).toBe(1);
      stream.close();
    } finally {
      client.close();
      session.close();
    }
  }, 60_000);
});
