import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import '../../examples/jsonl-file-connector/src/index.js';
import { bareJob } from '../../src/job/job-config.js';
import { JobRuntime } from '../../src/job/job-runtime.js';
import { createLogger } from '../../src/log.js';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait-for.js';

describe('the JavaScript heap growth a job runs with (memory.heapGrowthPercent)', () => {
  let dir: ReturnType<typeof tempDir>;
  let runtime: JobRuntime | undefined;
  beforeEach(() => {
    dir = tempDir();
  });
  afterEach(async () => {
    await runtime?.stop();
    runtime = undefined;
    dir.remove();
  });
  const exportTo = (file: string) => ({ connector: 'jsonl-file', path: join(dir.path, file) });

  it("unset: 300 (V8's largest) while the job only serves, the export's limit once an export starts (created over the API), for good", async () => {
    runtime = await JobRuntime.start(bareJob(join(dir.path, 'data')), createLogger({ level: 'silent' }));
    expect(runtime.heapGrowth.percent).toBe(300);
    const { core } = runtime;
    await core.createTopic('events');
    await core.createSubscription('pulled', { topic: 'events' });
    expect(runtime.heapGrowth.percent).toBe(300);
    await core.createSubscription('to-file', { topic: 'events', exportConfig: exportTo('out.jsonl') });
    await waitFor('the export to start', () => runtime!.heapGrowth.percent === 60);
    await core.deleteSubscription('to-file');
    await runtime.exports.sync();
    expect(runtime.heapGrowth.percent).toBe(60);
  });

  it('unset: the export limit from the start in a process that inspects', async () => {
    runtime = await JobRuntime.start(bareJob(join(dir.path, 'data')), createLogger({ level: 'silent' }), { mode: 'inspect' });
    expect(runtime.heapGrowth.percent).toBe(60);
  });

  it('set: what the job says, whatever runs', async () => {
    const job = bareJob(join(dir.path, 'data'));
    runtime = await JobRuntime.start({ ...job, memory: { ...job.memory, heapGrowthPercent: 120 } }, createLogger({ level: 'silent' }));
    expect(runtime.heapGrowth.percent).toBe(120);
    await runtime.core.createTopic('events');
    await runtime.core.createSubscription('to-file', { topic: 'events', exportConfig: exportTo('out.jsonl') });
    await runtime.exports.sync();
    expect(runtime.heapGrowth.percent).toBe(120);
  });
});
