import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { conformanceCases } from 'orderly/testing';
import { readLines } from '../src/jsonl-file.js';

// Orderly's conformance suite, on this connector, loaded the way a job file loads it (`plugins:`).
for (const c of conformanceCases({
  connector: 'jsonl-file',
  plugin: fileURLToPath(new URL('../src/index.js', import.meta.url)),
  skipsDuplicates: true,
  config: ({ dir }) => ({ path: join(dir, 'out.jsonl') }),
  readBack: async ({ dir }) => (await readLines(join(dir, 'out.jsonl'))).map((line) => line.id),
})) {
  await test(c.name, c.run);
}
