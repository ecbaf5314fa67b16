import { describe, expect, it } from 'vitest';
import { checkImmutable, normalizeSubscription, type SubscriptionInput } from '../../src/core/subscription-config.js';

const resolve = (t: string) => (t.startsWith('projects/') ? t : `projects/p/topics/${t}`);
const norm = (extra: Partial<SubscriptionInput>) => normalizeSubscription({ topic: 't1', ...extra }, resolve);

describe('subscription fields', () => {
  it('fills Pub/Sub defaults', () => {
    expect(norm({})).toEqual({
      topic: 'projects/p/topics/t1',
      ackDeadlineSeconds: 10,
      messageRetentionDuration: 604800,
      retainAckedMessages: false,
      enableMessageOrdering: false,
      filter: '',
      enableExactlyOnceDelivery: false,
      labels: {},
    });
    expect(norm({ retryPolicy: {} }).retryPolicy).toEqual({ minimumBackoff: 10, maximumBackoff: 600 });
    expect(norm({ deadLetterPolicy: { deadLetterTopic: 'dlt' } }).deadLetterPolicy).toEqual({
      deadLetterTopic: 'projects/p/topics/dlt',
      maxDeliveryAttempts: 5,
    });
  });

  it.each<[Partial<SubscriptionInput>, string]>([
    [{ ackDeadlineSeconds: 9 }, 'ackDeadlineSeconds: must be an integer between 10 and 600, got 9'],
    [{ ackDeadlineSeconds: 601 }, 'ackDeadlineSeconds: must be an integer between 10 and 600, got 601'],
    [{ messageRetentionDuration: '599s' }, 'messageRetentionDuration: must be between 600s and 2678400s, got 599s'],
    [{ messageRetentionDuration: 31 * 86400 + 1 }, 'messageRetentionDuration: must be between 600s and 2678400s, got 2678401s'],
    [{ messageRetentionDuration: 'soon' }, 'messageRetentionDuration: not a duration: "soon"'],
    [
      { deadLetterPolicy: { deadLetterTopic: 'd', maxDeliveryAttempts: 4 } },
      'deadLetterPolicy.maxDeliveryAttempts: must be an integer between 5 and 100, got 4',
    ],
    [{ deadLetterPolicy: { deadLetterTopic: 'd', maxDeliveryAttempts: 101 } }, 'got 101'],
    [{ retryPolicy: { minimumBackoff: '601s' } }, 'retryPolicy.minimumBackoff: must be between 0s and 600s, got 601s'],
    [
      { retryPolicy: { minimumBackoff: '20s', maximumBackoff: '10s' } },
      'retryPolicy.maximumBackoff: must not be below minimumBackoff (20s), got 10s',
    ],
    [{ expirationPolicy: { ttl: '3600s' } }, 'expirationPolicy.ttl: must be at least 1 day'],
    [{ filter: 'attributes.x = ' }, 'filter: expected a quoted string'],
    [{ pushConfig: { pushEndpoint: 'ftp://x' } }, 'pushConfig.pushEndpoint: must be an http(s) URL'],
    [
      { pushConfig: { pushEndpoint: 'http://127.0.0.1:1/' }, bigqueryConfig: { table: 'p.d.t' } },
      'bigqueryConfig: at most one of pushConfig, bigqueryConfig, cloudStorageConfig, exportConfig may be set, got pushConfig and bigqueryConfig',
    ],
    [{ enableMessageOrdering: 'yes' as unknown as boolean }, 'enableMessageOrdering: must be true or false, got "yes"'],
    // Pub/Sub: only pull subscriptions support exactly-once delivery.
    [
      { enableExactlyOnceDelivery: true, pushConfig: { pushEndpoint: 'http://127.0.0.1:1/' } },
      'enableExactlyOnceDelivery: exactly-once delivery is supported on pull subscriptions only, not with pushConfig',
    ],
    [{ enableExactlyOnceDelivery: true, bigqueryConfig: { table: 'p.d.t' } }, 'only, not with bigqueryConfig'],
    [{ enableExactlyOnceDelivery: true, cloudStorageConfig: { bucket: 'b' } }, 'only, not with cloudStorageConfig'],
    [{ enableExactlyOnceDelivery: true, exportConfig: { connector: 'c' } }, 'only, not with exportConfig'],
  ])('rejects %j', (extra, message) => {
    expect(() => norm(extra)).toThrow(message);
  });

  it('accepts the bounds themselves', () => {
    expect(norm({ ackDeadlineSeconds: 10 }).ackDeadlineSeconds).toBe(10);
    expect(norm({ ackDeadlineSeconds: 600 }).ackDeadlineSeconds).toBe(600);
    expect(norm({ messageRetentionDuration: '10m' }).messageRetentionDuration).toBe(600);
    expect(norm({ messageRetentionDuration: '31d' }).messageRetentionDuration).toBe(31 * 86400);
    expect(norm({ retryPolicy: { minimumBackoff: 0, maximumBackoff: '600s' } }).retryPolicy).toEqual({
      minimumBackoff: 0,
      maximumBackoff: 600,
    });
    expect(norm({ deadLetterPolicy: { deadLetterTopic: 'd', maxDeliveryAttempts: 100 } }).deadLetterPolicy?.maxDeliveryAttempts).toBe(100);
    expect(norm({ pushConfig: {} }).pushConfig).toBeUndefined();
    expect(norm({ enableExactlyOnceDelivery: true, pushConfig: {} }).enableExactlyOnceDelivery).toBe(true);
  });

  it('enableMessageOrdering and filter are fixed at creation', () => {
    expect(() => checkImmutable(norm({ enableMessageOrdering: true }), norm({}))).toThrow(
      'enableMessageOrdering cannot be changed after creation',
    );
    expect(() => checkImmutable(norm({ filter: 'attributes:a' }), norm({ filter: 'attributes:b' }))).toThrow('filter cannot be changed');
    expect(() => checkImmutable(norm({ ackDeadlineSeconds: 10 }), norm({ ackDeadlineSeconds: 20 }))).not.toThrow();
  });
});
