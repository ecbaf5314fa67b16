import { expect, it } from 'vitest';
import { FailureTimeline } from '../../bench/failure-timeline.js';

it('a sample read before a lease expiry and answered after the redelivery it explains does not stand for the count after that delivery', async () => {
  let time = 0;
  let serverFailures = 0;
  /** While set, a read's answer (the count when it was read) waits until `answer` is called, as in a busy event loop. */
  let answer: (() => void) | undefined;
  let holdAnswers = false;
  const read = () => {
    const failures = serverFailures;
    return holdAnswers ? new Promise<number>((resolve) => (answer = () => resolve(failures))) : Promise.resolve(failures);
  };
  const timeline = new FailureTimeline(read, 3_600_000, () => time);
  await timeline.start();

  const publishedAt = 5;
  time = 10;
  holdAnswers = true;
  const stale = timeline.sample();
  time = 20;
  serverFailures = 1; // the lease expires on the server...
  const redeliveredAt = 30; // ...and the message comes again
  time = 40;
  answer!(); // the sample read at 10 is seen only now
  await stale;
  holdAnswers = false;
  time = 50;
  await timeline.stop();

  expect(timeline.atOrBefore(publishedAt)).toBe(0);
  expect(timeline.atOrAfter(redeliveredAt)).toBe(1);
});

it('failures before the last sample answered before the publish, or after the first sample started after the delivery, do not explain it', async () => {
  let time = 0;
  let serverFailures = 0;
  const timeline = new FailureTimeline(
    () => Promise.resolve(serverFailures),
    3_600_000,
    () => time,
  );
  const sampleAt = async (t: number) => {
    time = t;
    await timeline.sample();
  };
  await timeline.start();
  serverFailures = 1; // an expiry long before the message is published
  await sampleAt(10);
  const publishedAt = 20;
  await sampleAt(30);
  const rewoundAt = 40; // a rewind with no nack or expiry anywhere near it
  await sampleAt(50);
  serverFailures = 2; // an expiry after it
  await sampleAt(60);
  time = 70;
  await timeline.stop();

  expect(timeline.atOrAfter(rewoundAt) - timeline.atOrBefore(publishedAt)).toBe(0);
});
