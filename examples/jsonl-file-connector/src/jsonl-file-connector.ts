import { mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import { emptyResult, type Connector, type ExportMessage, type WriteResult } from 'orderly/connector';
import { appendLines, readLines, type Line } from './jsonl-file.js';

/**
 * Appends each message as a JSON line and syncs the file before reporting it written (only then does the
 * runner ack it). A redelivery of a message already in the file — after a crash, or after the sink failed
 * between writing and reporting — is reported written without writing it again: the connector remembers
 * the ids it wrote under the subscription's uid (never under its name, which a new subscription may reuse).
 */
export class JsonlFileConnector implements Connector {
  readonly counters = { linesWritten: 0 };
  private readonly written = new Set<string>();

  constructor(
    private readonly path: string,
    private readonly uid: string,
  ) {}

  async open(): Promise<void> {
    await mkdir(dirname(this.path), { recursive: true });
    for (const line of await readLines(this.path, { repair: true })) if (line.uid === this.uid) this.written.add(line.id);
  }

  async write(batch: ExportMessage[]): Promise<WriteResult> {
    const lines: Line[] = batch
      .filter(({ message }) => !this.written.has(message.messageId))
      .map(({ message: m }) => ({
        uid: this.uid,
        id: m.messageId,
        key: m.orderingKey,
        sequence: m.sequence,
        data: m.data.toString('utf8'),
      }));
    if (lines.length) {
      await appendLines(this.path, lines);
      for (const line of lines) this.written.add(line.id);
      this.counters.linesWritten += lines.length;
    }
    return { ...emptyResult(), written: batch.map((d) => d.id) };
  }

  /** Nothing is buffered: every write is durable when it returns. */
  async flush(): Promise<WriteResult> {
    return emptyResult();
  }

  async close(): Promise<void> {}
}
