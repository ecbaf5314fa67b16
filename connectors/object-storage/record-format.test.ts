import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { tempDir } from '../../test/helpers/temp-dir.js';
import type { PubsubMessage } from '../../src/core/message.js';
import { compileSchema, type CompiledSchema } from '../../src/schema/schema-definition.js';
import type { TopicSchema } from '../../src/schema/topic-schema.js';
import { openRecordFile, readRecords, RecordConversionError } from './record-format.js';

const SCHEMA = 'projects/p/schemas/s';
const FORMAT = { kind: 'avro', writeMetadata: false, useTopicSchema: true } as const;
const record = (fields: string) =>
  compileSchema('AVRO', JSON.stringify({ type: 'record', name: 'R', fields: JSON.parse(fields) as unknown }));

function message(id: number, data: string): PubsubMessage {
  return {
    messageId: String(id),
    publishTime: new Date(),
    data: Buffer.from(data),
    attributes: { googclient_schemaname: SCHEMA, googclient_schemarevisionid: 'r1', googclient_schemaencoding: 'JSON' },
    orderingKey: 'k',
    sequence: id,
  };
}

/** A topic schema whose revision r1 answers `revisions` in turn, the last one from then on. */
function topicSchema(...revisions: CompiledSchema[]): () => TopicSchema {
  let calls = 0;
  const topic: TopicSchema = {
    current: { schema: SCHEMA, type: 'AVRO', encoding: 'JSON', revisions: [{ revisionId: 'r1', schema: revisions.at(-1)! }] },
    revision: () => revisions[Math.min(calls++, revisions.length - 1)]!,
  };
  return () => topic;
}

let dir: ReturnType<typeof tempDir>;
beforeEach(() => {
  dir = tempDir();
});
afterEach(() => dir.remove());

describe('Avro files with the topic schema: a broken record or stream', () => {
  it('a record the encoder refuses fails that message alone; the file goes on and closes', async () => {
    // The message is read with {v: int} but the file was laid out by {v: string}: whatever the cause (a
    // recursive schema's layout was one), the encoder cannot take the record.
    const path = join(dir.path, 'f.avro');
    const file = await openRecordFile(
      path,
      FORMAT,
      topicSchema(record('[{"name":"v","type":"int"}]'), record('[{"name":"v","type":"string"}]')),
    );
    await expect(file.append('projects/p/subscriptions/s', message(1, '{"v": 1}'))).rejects.toThrow(RecordConversionError);
    await expect(file.append('projects/p/subscriptions/s', message(2, '{"v": "two"}'))).resolves.toBeUndefined();
    await file.close();
    const records = await readRecords(readFileSync(path), FORMAT);
    expect(records.map((r) => r.value)).toEqual([{ v: 'two' }]);
  });

  it('close rejects, rather than waiting forever, when the file stream broke', async () => {
    // Every write to /dev/full fails (ENOSPC): the header, written as the first record comes, breaks the stream.
    const file = await openRecordFile('/dev/full', FORMAT, topicSchema(record('[{"name":"v","type":"int"}]')));
    await file.append('projects/p/subscriptions/s', message(1, '{"v": 1}'));
    await sleep(50);
    await expect(file.close()).rejects.toThrow(/ENOSPC|no space/i);
  }, 5_000);
});
