import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterEach, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { tempDir } from '../../test/helpers/core.js';
import { LocalManifestLog } from './manifest-log.js';
import { createS3Client, s3Connection } from './s3-client.js';

const dir = tempDir('orderly-manifest-memory-');
afterEach(() => dir.remove());

/** A full collection, so the heap's size is what is still referenced. */
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const liveHeap = () => {
  gc();
  return process.memoryUsage().heapUsed;
};

// A 1M-message Parquet export's manifest (201 objects, 633,021 key ranges, 28 MB): the writer kept every
// entry it read at open for as long as it ran, 56 MB of heap given to nothing after a restart.
it("a writer's local manifest keeps none of the objects committed before it opened once it has read them", () => {
  const path = join(dir.path, 'manifest.jsonl');
  const lines: string[] = [];
  for (let o = 0; o < 40; o++) {
    const keys: Record<string, { first: number; last: number; count: number }> = {};
    for (let k = 0; k < 5_000; k++) keys[`key-${k}`] = { first: o + 1, last: o + 1, count: 1 };
    const at = new Date(Date.UTC(2026, 0, 1, 0, o)).toISOString();
    lines.push(
      JSON.stringify({
        type: 'committed',
        object: `o-${o}`,
        bucket: 'b',
        format: 'parquet',
        createdAt: at,
        counter: o + 1,
        committedAt: at,
        records: 5_000,
        bytes: 1,
        keys,
        unkeyed: [],
      }),
    );
  }
  writeFileSync(path, `${lines.join('\n')}\n`);
  const s3 = createS3Client(s3Connection({ endpoint: 'http://127.0.0.1:9', region: 'us-east-1', accessKeyId: 'a', secretAccessKey: 'b' }));
  const before = liveHeap();
  const log = new LocalManifestLog(path, s3, 'b', createLogger({ level: 'silent' }));
  try {
    const committed = log.committedAtOpen();
    expect(committed.map((e) => Object.keys(e.keys).length)).toEqual(Array(40).fill(5_000));
    // What it holds once the writer has taken them: 200,000 key ranges, 17 MB, stayed before.
    const held = liveHeap() - before;
    committed.length = 0;
    expect(liveHeap() - before).toBeLessThan(held / 10);
  } finally {
    log.close();
    s3.destroy();
  }
});
