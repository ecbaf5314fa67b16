import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import { LongFilesFirst } from './test/long-files-first.js';

const source = (path: string) => fileURLToPath(new URL(path, import.meta.url));

export default defineConfig({
  // examples/ import Orderly by its package name; inside this repository that is the source.
  resolve: {
    alias: [
      { find: /^orderly$/, replacement: source('./src/index.ts') },
      { find: /^orderly\/connector$/, replacement: source('./src/connector/index.ts') },
      { find: /^orderly\/testing$/, replacement: source('./src/testing/index.ts') },
    ],
  },
  test: {
    include: ['test/**/*.test.ts', 'connectors/**/*.test.ts'],
    // Tests that spawn the CLI run dist/: built first when a source changed.
    globalSetup: ['test/build-dist.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Vitest's default is one worker fewer than the CPUs: one on a 2-core CI machine, where most of the
    // suite's time is spent waiting on child processes, sockets and timers rather than on the CPU.
    maxWorkers: 2,
    sequence: { sequencer: LongFilesFirst },
    // METADATA_SERVER_DETECTION: Google's client must not probe for a GCE metadata server from tests.
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true', METADATA_SERVER_DETECTION: 'none' },
  },
});
