/**
 * `orderly/testing`: the conformance suite every export connector should pass — ordering, redelivery,
 * crash and restart, buffered flush — on real jobs. Framework-neutral: each case is a name and an async
 * function that throws ConformanceError, e.g. with vitest, jest or node:test:
 *
 *   for (const c of conformanceCases({ connector: 'jsonl-file', plugin: './dist/index.js', config, readBack, skipsDuplicates: true })) it(c.name, c.run);
 */
export { conformanceCases, ConformanceError } from './conformance.js';
export type { ConformanceCase, ConformanceOptions, SinkUnderTest } from './conformance-options.js';
export { sinkProblems, type PublishedMessage } from './sink-check.js';
