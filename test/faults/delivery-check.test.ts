import { describe, expect, it } from 'vitest';
import { checkDelivery, restoredBySequence, type SinkRecord } from './delivery-check.js';

const r = (messageId: string, orderingKey: string, sequence: number, position = sequence): SinkRecord => ({
  messageId,
  orderingKey,
  sequence,
  position,
});
const none = { count: 0, examples: [] };

/** The fault suite's verdicts come from this checker: it must see every kind of defect it is asked about. */
describe('the delivery check of the fault suite', () => {
  it('passes a sink that holds every confirmed message once, in order (unconfirmed extras allowed once)', () => {
    const report = checkDelivery(
      ['a1', 'a2', 'b1'],
      [{ name: 't', records: [r('a1', 'a', 1), r('b1', 'b', 1), r('x', 'a', 2), r('a2', 'a', 3)] }],
    );
    expect(report).toEqual({ records: 4, duplicates: none, missing: none, orderViolations: none });
  });

  it('finds a duplicate (also across containers), a missing confirmed message and an order violation', () => {
    const report = checkDelivery(
      ['a1', 'a2', 'a3', 'b1'],
      [
        { name: 'f1', records: [r('a1', 'a', 1), r('a3', 'a', 3), r('a2', 'a', 2)] },
        { name: 'f2', records: [r('a1', 'a', 1)] },
      ],
    );
    expect(report.duplicates).toEqual({ count: 1, examples: ['a1 (key a, sequence 1) again in f2'] });
    expect(report.missing).toEqual({ count: 1, examples: ['b1'] });
    expect(report.orderViolations).toEqual({ count: 1, examples: ['f1: key a has #2 (sequence 2) after #3 (sequence 3)'] });
  });

  it('sees a key whose sequence order disagrees with its publish order across files', () => {
    const files = [
      { name: 'f1', records: [r('a2', 'a', 2, 1)] },
      { name: 'f2', records: [r('a1', 'a', 1, 2)] },
    ];
    expect(checkDelivery([], files).orderViolations).toEqual(none);
    expect(checkDelivery([], [restoredBySequence(files)]).orderViolations.count).toBe(1);
  });
});
